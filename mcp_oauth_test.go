package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// oauthTestServer is an MCP server behind OAuth and its authorization
// server's token endpoint, on one local listener: /mcp takes only the
// access token it has last issued; /token swaps a refresh token for the
// next pair (rotating it), or answers the error it is given.
type oauthTestServer struct {
	mcp mcpTestHTTPServer

	mu       sync.Mutex
	valid    string       // the access token /mcp takes
	refresh  string       // the refresh token /token takes
	fail     string       // an OAuth error code /token answers with, when set
	requests []url.Values // the forms /token was sent
	basic    []string     // their Authorization headers
	rejected int          // the 401s /mcp answered
}

func (o *oauthTestServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch r.URL.Path {
	case "/token":
		r.ParseForm()
		o.requests = append(o.requests, r.PostForm)
		o.basic = append(o.basic, r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		switch {
		case o.fail != "":
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]string{"error": o.fail, "error_description": "no: " + r.PostForm.Get("refresh_token")})
		case r.PostForm.Get("grant_type") != "refresh_token" || r.PostForm.Get("refresh_token") != o.refresh:
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant"})
		default:
			n := len(o.requests) + 1
			o.valid, o.refresh = "at-"+itoa(n), "rt-"+itoa(n)
			json.NewEncoder(w).Encode(map[string]any{"access_token": o.valid, "token_type": "Bearer", "expires_in": 3600, "refresh_token": o.refresh})
		}
	case "/mcp":
		if r.Header.Get("Authorization") != "Bearer "+o.valid {
			o.rejected++
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		o.mcp.ServeHTTP(w, r)
	default:
		http.NotFound(w, r)
	}
}

func itoa(n int) string { return string(rune('0' + n)) }

// writeSignIn stores a sign-in for the server web at base+"/mcp", as pi
// stores it, beside another server's entry that must stay as it is.
func writeSignIn(t *testing.T, agentDir, base string, state map[string]any) string {
	t.Helper()
	discovery := map[string]any{
		"authorizationServerUrl": base,
		"authorizationServerMetadata": map[string]any{
			"issuer": base, "token_endpoint": base + "/token", "response_types_supported": []string{"code"},
			"token_endpoint_auth_methods_supported": []string{"none", "client_secret_basic"},
			"client_id_metadata_document_supported": true, "authorization_response_iss_parameter_supported": true,
		},
		"resourceMetadata": map[string]any{"resource": base + "/mcp"},
	}
	entry := map[string]any{"serverUrl": base + "/mcp", "discovery": discovery}
	for k, v := range state {
		entry[k] = v
	}
	data, _ := json.MarshalIndent(map[string]any{
		"mcp__other|https://other.example.com/": map[string]any{"tokens": map[string]any{"access_token": "keep-me", "token_type": "Bearer"}},
		"mcp__web|" + base + "/mcp":             entry,
	}, "", "  ")
	path := filepath.Join(agentDir, "mcp-auth.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// readSignInFile is mcp-auth.json's entries, by key.
func readSignInFile(t *testing.T, path string) map[string]map[string]any {
	t.Helper()
	var states map[string]map[string]any
	data, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(data, &states) != nil {
		t.Fatalf("mcp-auth.json: %v %s", err, data)
	}
	return states
}

// TestMCPRefreshesStoredSignIn: rpi refreshes pi's stored sign-in as pi
// does — before sending a token about to expire, and after a 401 (the
// message then sent once more) — as the client pi signed in as (pi's
// Client ID Metadata Document, or the client pi registered, with its
// secret), for the resource pi signed in to; the new tokens are saved in
// mcp-auth.json (the rotated refresh token too), the other entries kept,
// and no lock is left behind.
func TestMCPRefreshesStoredSignIn(t *testing.T) {
	cases := []struct {
		name      string
		state     map[string]any
		wantForm  url.Values
		wantBasic string
	}{
		{"expired, pi's document", map[string]any{
			"tokens":         map[string]any{"access_token": "at-old", "token_type": "Bearer", "refresh_token": "rt-1", "scope": "read"},
			"tokensExpireAt": time.Now().Add(-time.Minute).UnixMilli(),
		}, url.Values{"client_id": {"https://pi.dev/oauth/client.json"}}, ""},
		{"rejected, a registered client", map[string]any{
			"tokens":            map[string]any{"access_token": "at-old", "token_type": "Bearer", "refresh_token": "rt-1", "scope": "read"},
			"tokensExpireAt":    time.Now().Add(time.Hour).UnixMilli(),
			"clientInformation": map[string]any{"client_id": "registered", "client_secret": "s3cret", "redirect_uris": []string{"http://127.0.0.1:8765/callback"}},
		}, url.Values{}, "Basic cmVnaXN0ZXJlZDpzM2NyZXQ="},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := &oauthTestServer{valid: "at-never", refresh: "rt-1"}
			hs := httptest.NewServer(o)
			defer hs.Close()
			e := newTestEnv(t)
			path := writeSignIn(t, e.agentDir, hs.URL, c.state)
			writeMCPServers(t, e.agentDir, map[string]any{"web": map[string]any{"url": hs.URL + "/mcp", "exposure": "direct"}})
			s := openWithMCP(t, e)
			if st := s.mcp.state("web"); st.State != "connected" {
				t.Fatalf("server: %+v", st)
			}
			s.close()
			o.mu.Lock()
			defer o.mu.Unlock()
			if len(o.requests) != 1 {
				t.Fatalf("%d token requests; want 1", len(o.requests))
			}
			form := o.requests[0]
			want := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"rt-1"}, "resource": {hs.URL + "/mcp"}}
			for k, v := range c.wantForm {
				want[k] = v
			}
			if form.Encode() != want.Encode() || o.basic[0] != c.wantBasic {
				t.Errorf("token request %v (Authorization %q); want %v (%q)", form, o.basic[0], want, c.wantBasic)
			}
			states := readSignInFile(t, path)
			web := states["mcp__web|"+hs.URL+"/mcp"]
			tokens, _ := web["tokens"].(map[string]any)
			if tokens["access_token"] != "at-2" || tokens["refresh_token"] != "rt-2" || tokens["scope"] != "read" {
				t.Errorf("saved tokens %v", tokens)
			}
			if at, _ := web["tokensExpireAt"].(float64); at < float64(time.Now().Add(59*time.Minute).UnixMilli()) {
				t.Errorf("tokensExpireAt %v: not an hour on", web["tokensExpireAt"])
			}
			if web["discovery"] == nil || web["serverUrl"] != hs.URL+"/mcp" || states["mcp__other|https://other.example.com/"] == nil {
				t.Errorf("the rest of mcp-auth.json changed: %v", states)
			}
			if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
				t.Errorf("mcp-auth.json: %v %v", info.Mode(), err)
			}
			entries, _ := os.ReadDir(e.agentDir)
			for _, entry := range entries {
				if strings.Contains(entry.Name(), ".lock") || strings.HasPrefix(entry.Name(), ".mcp-auth") {
					t.Errorf("left behind: %s", entry.Name())
				}
			}
		})
	}
}

// TestMCPRefreshRefused: a refresh the authorization server refuses
// leaves the server asking for `pi mcp login` — an invalid grant drops
// the stored tokens (pi then signs in afresh), a token endpoint that is
// not https is never sent the refresh token, and a server that asks for
// more scope is not refreshed at all; the refresh token never shows in
// a message.
func TestMCPRefreshRefused(t *testing.T) {
	cases := []struct {
		name, fail, endpoint, challenge string
		wantErr                         string
		wantRequests                    int
		tokensKept                      bool
	}{
		{"invalid grant", "invalid_grant", "", "", "MCP server web needs sign-in: run `pi mcp login web`", 1, false},
		{"another error", "invalid_scope", "", "", "MCP server web needs sign-in (the stored sign-in could not be refreshed: the authorization server refused the refresh: invalid_scope (no: [redacted])): run `pi mcp login web`", 1, true},
		{"not https", "", "http://auth.example.com/token", "", "MCP server web needs sign-in (the stored sign-in could not be refreshed: the authorization server's token endpoint is not https (http://auth.example.com)): run `pi mcp login web`", 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := &oauthTestServer{valid: "at-never", refresh: "rt-1", fail: c.fail}
			hs := httptest.NewServer(o)
			defer hs.Close()
			e := newTestEnv(t)
			state := map[string]any{"tokens": map[string]any{"access_token": "at-old", "token_type": "Bearer", "refresh_token": "rt-1"}}
			path := writeSignIn(t, e.agentDir, hs.URL, state)
			if c.endpoint != "" {
				states := readSignInFile(t, path)
				web := states["mcp__web|"+hs.URL+"/mcp"]
				web["discovery"].(map[string]any)["authorizationServerMetadata"].(map[string]any)["token_endpoint"] = c.endpoint
				data, _ := json.Marshal(states)
				os.WriteFile(path, data, 0o600)
			}
			writeMCPServers(t, e.agentDir, map[string]any{"web": map[string]any{"url": hs.URL + "/mcp", "exposure": "direct"}})
			s := openWithMCP(t, e)
			defer s.close()
			if st := s.mcp.state("web"); st.State != "needs_sign_in" || st.Error != c.wantErr {
				t.Errorf("server: %+v\nwant error %q", st, c.wantErr)
			}
			o.mu.Lock()
			requests := len(o.requests)
			o.mu.Unlock()
			if requests != c.wantRequests {
				t.Errorf("%d token requests; want %d", requests, c.wantRequests)
			}
			web := readSignInFile(t, path)["mcp__web|"+hs.URL+"/mcp"]
			if kept := web["tokens"] != nil; kept != c.tokensKept {
				t.Errorf("tokens kept: %v; want %v (%v)", kept, c.tokensKept, web)
			}
		})
	}
	t.Run("more scope", func(t *testing.T) {
		si := &mcpSignIn{server: "web"}
		h := &mcpHTTP{server: "web", signIn: si}
		err := h.signInError(&mcpRejected{needsScope: true}, nil)
		if want := "MCP server web needs sign-in (it asks for more access): run `pi mcp login web`"; err.Error() != want {
			t.Errorf("%v; want %s", err, want)
		}
	})
}

// TestMCPRefreshTakesTurns: a refresh whose stale token was replaced
// meanwhile (by pi, or another session) uses the stored one without a
// request; pi's refresh lock held by a live process is waited for, and
// one left by a dead process (not renewed for 20 s) is taken over.
func TestMCPRefreshTakesTurns(t *testing.T) {
	o := &oauthTestServer{valid: "at-new", refresh: "rt-1"}
	hs := httptest.NewServer(o)
	defer hs.Close()
	agentDir := t.TempDir()
	writeSignIn(t, agentDir, hs.URL, map[string]any{"tokens": map[string]any{"access_token": "at-new", "token_type": "Bearer", "refresh_token": "rt-1"}})
	si := newMCPSignIn(agentDir, mcpServerConfig{name: "web", url: hs.URL + "/mcp"}, time.Now)
	if got, err := si.refresh(context.Background(), "at-stale"); err != nil || got != "at-new" {
		t.Errorf("refresh of a replaced token: %q, %v", got, err)
	}
	if len(o.requests) != 0 {
		t.Errorf("%d token requests for a token replaced meanwhile", len(o.requests))
	}

	lock := filepath.Join(agentDir, "held")
	if err := os.Mkdir(lock+".lock", 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := piLock(context.Background(), lock, time.Minute, 300*time.Millisecond); err == nil || !strings.Contains(err.Error(), "another process holds held.lock") {
		t.Errorf("a live lock: %v", err)
	}
	old := time.Now().Add(-time.Minute)
	os.Chtimes(lock+".lock", old, old)
	held, err := piLock(context.Background(), lock, 20*time.Second, time.Second)
	if err != nil {
		t.Fatalf("a dead process's lock: %v", err)
	}
	held.unlock()
	if _, err := os.Stat(lock + ".lock"); !os.IsNotExist(err) {
		t.Errorf("the lock stays after unlock: %v", err)
	}
}

// TestMCPStoredSignIn: an HTTP server pi signed in to (pi mcp login) gets
// the access token pi stored in mcp-auth.json, under pi's key or the
// older one; a token that expired and cannot be refreshed is sent as it
// is (the server decides, as with pi); an entry whose own Authorization
// header says otherwise gets none.
func TestMCPStoredSignIn(t *testing.T) {
	agentDir := t.TempDir()
	os.WriteFile(filepath.Join(agentDir, "mcp-auth.json"), []byte(`{
  "mcp__my_docs|https://docs.example.com/mcp": {"serverUrl": "https://docs.example.com/mcp", "tokens": {"access_token": "at-1", "token_type": "Bearer", "refresh_token": "rt"}, "tokensExpireAt": 1800000100000},
  "https://old.example.com/": {"tokens": {"access_token": "at-old", "token_type": "Bearer"}},
  "mcp__late|https://late.example.com/mcp": {"tokens": {"access_token": "at-late", "token_type": "Bearer"}, "tokensExpireAt": 1700000000000}
}`), 0o600)
	cases := []struct {
		name, url, want string
		headers         map[string]string
	}{
		{"my-docs", "https://docs.example.com/mcp", "at-1", nil},
		{"old", "https://old.example.com", "at-old", nil},
		{"late", "https://late.example.com/mcp", "at-late", nil},
		{"other", "https://docs.example.com/mcp", "", nil},
	}
	now := func() time.Time { return time.UnixMilli(1_800_000_000_000) }
	for _, c := range cases {
		si := newMCPSignIn(agentDir, mcpServerConfig{name: c.name, url: c.url}, now)
		if got := si.token(context.Background()); got != c.want {
			t.Errorf("%s %s: %q; want %q", c.name, c.url, got, c.want)
		}
	}
	if si := newMCPSignIn(agentDir, mcpServerConfig{name: "my-docs", url: "https://docs.example.com/mcp", headers: map[string]string{"authorization": "Bearer mine"}}, now); si != nil {
		t.Error("an entry with its own Authorization header has a stored sign-in")
	}
	srv := &mcpTestHTTPServer{}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	e := newTestEnv(t)
	writeMCPServers(t, e.agentDir, map[string]any{"web": map[string]any{"url": hs.URL + "/mcp", "exposure": "direct"}})
	os.WriteFile(filepath.Join(e.agentDir, "mcp-auth.json"), []byte(`{"mcp__web|`+hs.URL+`/mcp": {"tokens": {"access_token": "signed-in", "token_type": "Bearer"}}}`), 0o600)
	openWithMCP(t, e)
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.auth) == 0 || srv.auth[0] != "Bearer signed-in" {
		t.Errorf("Authorization sent: %q", srv.auth)
	}
}
