package main

import (
	"context"
	"encoding/json"
	"errors"
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
	expires  any          // the expires_in of /token's answers; 3600 when nil
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
			expires := o.expires
			if expires == nil {
				expires = 3600
			}
			json.NewEncoder(w).Encode(map[string]any{"access_token": o.valid, "token_type": "Bearer", "expires_in": expires, "refresh_token": o.refresh})
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

// runNow runs a refresh on a goroutine of its own, as the host's
// goBackground does.
func runNow(f func()) { go f() }

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
	si := newMCPSignIn(agentDir, mcpServerConfig{name: "web", url: hs.URL + "/mcp"}, time.Now, runNow)
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
		si := newMCPSignIn(agentDir, mcpServerConfig{name: c.name, url: c.url}, now, runNow)
		if got := si.token(context.Background()); got != c.want {
			t.Errorf("%s %s: %q; want %q", c.name, c.url, got, c.want)
		}
	}
	if si := newMCPSignIn(agentDir, mcpServerConfig{name: "my-docs", url: "https://docs.example.com/mcp", headers: map[string]string{"authorization": "Bearer mine"}}, now, runNow); si != nil {
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

// TestMCPSignInRefreshAnswerSurvivesAbort: a refresh the authorization
// server has answered (rotating the refresh token) is saved even when
// the request that started it was aborted (the user's abort of a tool
// call, the session's close): the caller stops waiting at once, the
// refresh ends in the background (which shutdown waits for), as pi's.
func TestMCPSignInRefreshAnswerSurvivesAbort(t *testing.T) {
	received, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		if r.URL.Path != "/token" || r.PostForm.Get("refresh_token") != "rt-1" {
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant"})
			return
		}
		once.Do(func() { close(received) }) // rt-1 is spent from here on
		<-release
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": "at-2", "token_type": "Bearer", "expires_in": 3600, "refresh_token": "rt-2"})
	}))
	defer hs.Close()
	agentDir := t.TempDir()
	path := writeSignIn(t, agentDir, hs.URL, map[string]any{
		"tokens": map[string]any{"access_token": "at-1", "token_type": "Bearer", "refresh_token": "rt-1"},
	})
	var background sync.WaitGroup // the host's: shutdown waits for it
	si := newMCPSignIn(agentDir, mcpServerConfig{name: "web", url: hs.URL + "/mcp"}, time.Now, func(f func()) {
		background.Add(1)
		go func() { defer background.Done(); f() }()
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := si.refresh(ctx, "at-1"); done <- err }()
	<-received
	cancel() // the user aborts the tool call
	time.Sleep(100 * time.Millisecond)
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("the aborted refresh: %v", err)
	}
	close(release)
	background.Wait()
	tokens, _ := readSignInFile(t, path)["mcp__web|"+hs.URL+"/mcp"]["tokens"].(map[string]any)
	if tokens["refresh_token"] != "rt-2" {
		t.Errorf("after an abort mid-refresh mcp-auth.json keeps %v: the rotated refresh token rt-2 is lost, rt-1 is spent", tokens)
	}
}

// TestMCPSignInOAuthSecretResolvedLazily: as pi, only oauth.clientSecret
// is resolved (${VAR}, !command), and only when a refresh needs it: a
// command that fails (a locked password manager) fails a refresh, not
// the entry; clientId and the rest are taken as written.
func TestMCPSignInOAuthSecretResolvedLazily(t *testing.T) {
	ran := 0
	expand := func(v string, commands bool) (string, error) {
		if strings.HasPrefix(v, "!") && commands {
			ran++
			return "", errors.New("exit status 1")
		}
		return v, nil
	}
	u, secret := "https://mcp.example.com/mcp", "!op read op://vault/mcp/secret"
	entry := mcpEntry{URL: &u, OAuth: &mcpOAuthEntry{ClientSecret: &secret}}
	cfg, err := checkMCPEntry("web", "user", t.TempDir(), entry)
	if err == nil {
		err = expandMCPEntry(&cfg, entry, expand)
	}
	if err != nil {
		t.Errorf("the entry is refused (%v); pi connects with the stored token and fails only a refresh", err)
	}
	if ran != 0 {
		t.Errorf("oauth.clientSecret's command ran %d times at load; pi runs it only for a refresh", ran)
	}
	// pi takes clientId, callbackUrl and authServerMetadataUrl literally.
	id := "!not-a-command"
	cfg, err = checkMCPEntry("web", "user", t.TempDir(), mcpEntry{URL: &u, OAuth: &mcpOAuthEntry{ClientID: &id}})
	if err != nil || cfg.oauth.clientID != id {
		t.Errorf("oauth.clientId %q read as %q (%v); pi sends it as written", id, cfg.oauth.clientID, err)
	}
}

// TestMCPSignInResourceCheckAsPi: the stored protected resource is
// checked against the server's URL as pi checks it: origins as a browser
// writes them (host case, default port), percent-encoded paths.
func TestMCPSignInResourceCheckAsPi(t *testing.T) {
	for _, c := range []struct {
		server, resource string
		ok               bool
	}{
		{"https://mcp.example.com/mcp", "https://MCP.example.com/mcp", true},
		{"https://mcp.example.com/mcp", "https://mcp.example.com:443/mcp", true},
		{"https://mcp.example.com:443/mcp", "https://mcp.example.com/", true},
		{"https://mcp.example.com/a%2Fb", "https://mcp.example.com/a", false},
	} {
		if err := sameResource(c.server, c.resource); (err == nil) != c.ok {
			t.Errorf("server %s, resource %s: %v; pi's selectResource accepts: %v", c.server, c.resource, err, c.ok)
		}
	}
}

// TestMCPSignInMetadataURLSendsResource: with oauth.authServerMetadataUrl
// pi stores no discovery; a refresh reads the server's protected resource
// metadata and sends its resource, as pi's does.
func TestMCPSignInMetadataURLSendsResource(t *testing.T) {
	var mu sync.Mutex
	var forms []url.Values
	var base string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/.well-known/oauth-protected-resource/mcp":
			json.NewEncoder(w).Encode(map[string]any{"resource": base + "/mcp", "authorization_servers": []string{base}})
		case "/meta":
			json.NewEncoder(w).Encode(map[string]any{"issuer": base, "authorization_endpoint": base + "/authorize",
				"token_endpoint": base + "/token", "response_types_supported": []string{"code"}})
		case "/token":
			r.ParseForm()
			mu.Lock()
			forms = append(forms, r.PostForm)
			mu.Unlock()
			json.NewEncoder(w).Encode(map[string]any{"access_token": "at-2", "token_type": "Bearer", "expires_in": 3600})
		default:
			http.NotFound(w, r)
		}
	}))
	defer hs.Close()
	base = hs.URL
	agentDir := t.TempDir()
	path := writeSignIn(t, agentDir, base, map[string]any{
		"tokens":            map[string]any{"access_token": "at-1", "token_type": "Bearer", "refresh_token": "rt-1"},
		"clientInformation": map[string]any{"client_id": "registered"},
	})
	// As pi leaves it with a configured metadata URL: no discovery.
	states := readSignInFile(t, path)
	delete(states["mcp__web|"+base+"/mcp"], "discovery")
	data, _ := json.Marshal(states)
	writeFileWhole(path, data, 0o600)
	si := newMCPSignIn(agentDir, mcpServerConfig{name: "web", url: base + "/mcp", oauth: mcpOAuthSettings{metadataURL: base + "/meta"}}, time.Now, runNow)
	if _, err := si.refresh(context.Background(), "at-1"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(forms) != 1 || forms[0].Get("resource") != base+"/mcp" {
		t.Errorf("token requests %v; pi sends resource=%s", forms, base+"/mcp")
	}
}

// TestMCPSignInKeyAsWHATWG: a sign-in is found under the key pi writes,
// String(new URL(url)): host lowercased, default port and dot segments
// dropped (the refresh lock's name derives from the same key).
func TestMCPSignInSignInKeyAsWHATWG(t *testing.T) {
	for raw, want := range map[string]string{
		"https://MCP.Example.com/mcp":      "mcp__web|https://mcp.example.com/mcp",
		"https://mcp.example.com:443/mcp":  "mcp__web|https://mcp.example.com/mcp",
		"https://mcp.example.com/a/../mcp": "mcp__web|https://mcp.example.com/mcp",
	} {
		si := newMCPSignIn(t.TempDir(), mcpServerConfig{name: "web", url: raw}, time.Now, runNow)
		if si.keys[0] != want {
			t.Errorf("%s: key %q; pi's %q", raw, si.keys[0], want)
		}
	}
}

// TestMCPSignInLegacySignInRefreshedOnce: a sign-in under the older key
// (the URL alone) is taken over by the first server that reads it, as
// pi's load does, so two entries with that URL never spend its refresh
// token twice.
func TestMCPSignInLegacySignInRefreshedOnce(t *testing.T) {
	var mu sync.Mutex
	spent := map[string]int{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		mu.Lock()
		spent[r.PostForm.Get("refresh_token")]++
		mu.Unlock()
		time.Sleep(200 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": "at-2", "token_type": "Bearer", "expires_in": 3600, "refresh_token": "rt-2"})
	}))
	defer hs.Close()
	agentDir := t.TempDir()
	path := writeSignIn(t, agentDir, hs.URL, map[string]any{
		"tokens": map[string]any{"access_token": "at-1", "token_type": "Bearer", "refresh_token": "rt-1"},
	})
	states := readSignInFile(t, path)
	states[hs.URL+"/mcp"] = states["mcp__web|"+hs.URL+"/mcp"]
	delete(states, "mcp__web|"+hs.URL+"/mcp")
	data, _ := json.Marshal(states)
	writeFileWhole(path, data, 0o600)
	var wg sync.WaitGroup
	for _, name := range []string{"a", "b"} {
		si := newMCPSignIn(agentDir, mcpServerConfig{name: name, url: hs.URL + "/mcp"}, time.Now, runNow)
		wg.Add(1)
		go func() { defer wg.Done(); si.refresh(context.Background(), "at-1") }()
	}
	wg.Wait()
	if spent["rt-1"] > 1 {
		t.Errorf("the legacy sign-in's refresh token was sent %d times", spent["rt-1"])
	}
}

// TestMCPSignInFarExpiry: an authorization server's expires_in too large
// for a time in milliseconds is saved as a far expiry, and one pi saved
// so is read as far: it was saved as a time before 1970 (which pi reads
// as expired, refreshing before every message), and pi's was read as
// past, rpi refreshing before every message.
func TestMCPSignInFarExpiry(t *testing.T) {
	o := &oauthTestServer{valid: "at-1", refresh: "rt-1", expires: 1e300}
	hs := httptest.NewServer(o)
	defer hs.Close()
	agentDir := t.TempDir()
	state := map[string]any{"tokens": map[string]any{"access_token": "at-1", "token_type": "Bearer", "refresh_token": "rt-1"}}
	path := writeSignIn(t, agentDir, hs.URL, state)
	si := newMCPSignIn(agentDir, mcpServerConfig{name: "web", url: hs.URL + "/mcp"}, time.Now, runNow)
	if got, err := si.refresh(context.Background(), "at-1"); err != nil || got != "at-2" {
		t.Fatalf("refresh: %q, %v", got, err)
	}
	web := readSignInFile(t, path)["mcp__web|"+hs.URL+"/mcp"]
	if at, _ := web["tokensExpireAt"].(float64); at < float64(time.Now().AddDate(100, 0, 0).UnixMilli()) {
		t.Errorf("tokensExpireAt %v for expires_in 1e300; want a time far on", web["tokensExpireAt"])
	}
	// As pi saves it: Date.now() + 1e300 * 1000.
	writeSignIn(t, agentDir, hs.URL, map[string]any{
		"tokens":         map[string]any{"access_token": "at-3", "token_type": "Bearer", "refresh_token": "rt-3"},
		"tokensExpireAt": 1e303,
	})
	if got := si.token(context.Background()); got != "at-3" {
		t.Errorf("the token sent: %q; want the stored at-3", got)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.requests) != 1 {
		t.Errorf("%d token requests; want the one refresh", len(o.requests))
	}
}

// TestMCPSignInExpiresInNotANumber: an expires_in of "Infinity" or "NaN"
// (a string, which pi reads as a number) is an invalid answer, as pi
// finds it: it was taken as a number that JSON cannot hold, and the
// refresh failed saving it, with an error about rpi's own types.
func TestMCPSignInExpiresInNotANumber(t *testing.T) {
	for _, expires := range []string{"Infinity", "NaN", "-inf"} {
		o := &oauthTestServer{valid: "at-1", refresh: "rt-1", expires: expires}
		hs := httptest.NewServer(o)
		agentDir := t.TempDir()
		state := map[string]any{"tokens": map[string]any{"access_token": "at-1", "token_type": "Bearer", "refresh_token": "rt-1"}}
		writeSignIn(t, agentDir, hs.URL, state)
		si := newMCPSignIn(agentDir, mcpServerConfig{name: "web", url: hs.URL + "/mcp"}, time.Now, runNow)
		if _, err := si.refresh(context.Background(), "at-1"); err == nil || err.Error() != "the authorization server's answer has an invalid expires_in" {
			t.Errorf("expires_in %q: %v", expires, err)
		}
		hs.Close()
	}
}
