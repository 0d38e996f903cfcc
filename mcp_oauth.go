package main

// Sign-ins to MCP servers, as pi stores them (pi mcp login): rpi sends
// the access token pi keeps in <agent dir>/mcp-auth.json and, as pi
// does, refreshes it when it is about to expire or the server rejects
// it — under pi's own locks, so that rpi and pi never spend one refresh
// token twice (servers that rotate refresh tokens drop the grant then).
// rpi never signs in and never registers a client: when a refresh is not
// possible, the server needs `pi mcp login NAME` (docs/mcp.md#sign-in).

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The timings of pi's locks and refreshes.
const (
	mcpRefreshSkew      = 30 * time.Second // a token this close to expiry is refreshed before it is sent
	mcpRefreshLockStale = 20 * time.Second // a refresh lock not renewed for this long was left by a dead process
	mcpRefreshLockWait  = 25 * time.Second // how long to wait for another process's refresh
	mcpAuthLockStale    = 10 * time.Second // the same for the lock of mcp-auth.json itself
	mcpAuthLockWait     = 200 * time.Millisecond
	oauthRequestLimit   = 15 * time.Second // each request to the authorization server
	piLockRetry         = 100 * time.Millisecond
	piClientDocuments   = "https://pi.dev/oauth" // pi's Client ID Metadata Documents
	oauthDefaultReturn  = "http://127.0.0.1/callback"
)

// mcpOAuthSettings is an HTTP entry's "oauth" object: the client pi signs
// in (and so refreshes) as.
type mcpOAuthSettings struct {
	clientID     string
	secret       string                 // clientSecret, resolved (secretOf) when a refresh needs it
	secretOf     func() (string, error) // resolves clientSecret's ${VAR} or !command; nil when none is set
	clientName   string
	registration string // auto (""), dcr or cimd
	callbackURL  string
	callbackPort int
	metadataURL  string // the authorization server's metadata, when the entry names it
}

// errSignInNeeded: the stored sign-in cannot be refreshed; the user signs
// in again with pi.
var errSignInNeeded = errors.New("sign-in needed")

// mcpSignIn is one HTTP server's stored sign-in, which its connection
// sends with each request.
type mcpSignIn struct {
	server  string // the entry's name, for messages
	file    string // <agent dir>/mcp-auth.json
	lockDir string // the agent dir, where pi keeps its refresh locks
	keys    [2]string
	url     string // the server's URL as pi writes it
	oauth   mcpOAuthSettings
	now     func() time.Time
	client  *http.Client
	// background runs a refresh to its end, whoever stops waiting for it.
	background func(func())
	// secrets are the session's keys, which the stored tokens and client
	// secret join as they are read: a server may echo one.
	secrets *redactor
	// refreshing is held (a token in it) by the one refresh this
	// connection runs at a time; others wait for it, then see its token.
	refreshing chan struct{}
}

// newMCPSignIn is the sign-in of the entry cfg, or nil when it cannot have
// one: its own Authorization header, or a URL that is not one.
// A refresh runs in background (the host's goBackground: shutdown waits
// for it), so that an abort never drops an answer the server has given.
func newMCPSignIn(agentDir string, cfg mcpServerConfig, now func() time.Time, background func(func())) *mcpSignIn {
	u, err := url.Parse(cfg.url)
	if err != nil || hasHeader(cfg.headers, "Authorization") || agentDir == "" {
		return nil
	}
	serverURL := whatwgURL(u)
	return &mcpSignIn{
		server: cfg.name, file: filepath.Join(agentDir, "mcp-auth.json"), lockDir: agentDir,
		keys: [2]string{"mcp__" + strings.ReplaceAll(cfg.name, "-", "_") + "|" + serverURL, serverURL},
		url:  serverURL, oauth: cfg.oauth, now: now, background: background, refreshing: make(chan struct{}, 1),
		client: &http.Client{
			// Refreshes are rare: no connection is kept open after one.
			Transport:     &http.Transport{Proxy: http.ProxyFromEnvironment, TLSHandshakeTimeout: 10 * time.Second, DisableKeepAlives: true},
			CheckRedirect: func(*http.Request, []*http.Request) error { return errMCPRedirect },
		},
	}
}

// token is the access token to send: the stored one, refreshed first
// when it expires within mcpRefreshSkew and can be; "" when pi stored
// none. A refresh that fails sends the old token, and the server's
// answer decides.
func (si *mcpSignIn) token(ctx context.Context) string {
	state, _, err := si.load()
	if err != nil || state.accessToken == "" {
		return ""
	}
	if state.expiresAt.IsZero() || state.expiresAt.Sub(si.now()) > mcpRefreshSkew || state.refreshToken == "" {
		return state.accessToken
	}
	if fresh, err := si.refresh(ctx, state.accessToken); err == nil {
		return fresh
	}
	return state.accessToken
}

// refresh replaces stale, the access token that expired or was rejected,
// and returns the new one: at most one refresh per connection at a time,
// and none across processes while pi's refresh lock is held. A token
// changed meanwhile (another refresh, a new sign-in) is used as it is.
//
// The refresh runs in the background and ends even when ctx ends first:
// a server that has answered may have rotated the refresh token, so its
// answer is saved (each request to it takes at most oauthRequestLimit).
func (si *mcpSignIn) refresh(ctx context.Context, stale string) (string, error) {
	select {
	case si.refreshing <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	type outcome struct {
		token string
		err   error
	}
	done := make(chan outcome, 1)
	si.background(func() {
		defer func() { <-si.refreshing }()
		token, err := si.refreshHeld(ctx, stale)
		done <- outcome{token, err}
	})
	select {
	case o := <-done:
		return o.token, o.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// refreshHeld is refresh, its connection's turn taken: ctx ends the wait
// for pi's lock, not the requests made once it is held.
func (si *mcpSignIn) refreshHeld(ctx context.Context, stale string) (string, error) {
	sum := sha256.Sum256([]byte(si.keys[0]))
	lock, err := piLock(ctx, filepath.Join(si.lockDir, "mcp-auth-refresh-"+hex.EncodeToString(sum[:])[:16]),
		mcpRefreshLockStale, mcpRefreshLockWait)
	if err != nil {
		return "", err
	}
	defer lock.unlock()
	state, _, err := si.load()
	switch {
	case err != nil:
		return "", err
	case state.accessToken != stale && state.accessToken != "":
		return state.accessToken, nil
	case state.refreshToken == "":
		return "", errSignInNeeded
	}
	tokens, err := si.requestTokens(context.WithoutCancel(ctx), state, lock.renew)
	var oerr *oauthError
	switch {
	case errors.As(err, &oerr) && (oerr.code == "invalid_client" || oerr.code == "unauthorized_client"):
		// The client is gone: pi forgets it with the tokens and the
		// discovery, unless a sign-in stored another meanwhile.
		si.update(func(s *jsonObject) bool {
			if !bytes.Equal(s.get("clientInformation"), state.clientRaw) {
				return false
			}
			s.del("clientInformation", "tokens", "tokensExpireAt", "discovery")
			return true
		})
		return "", errSignInNeeded
	case errors.As(err, &oerr) && oerr.code == "invalid_grant":
		si.update(func(s *jsonObject) bool { s.del("tokens", "tokensExpireAt"); return true })
		return "", errSignInNeeded
	case errors.As(err, &oerr) && oerr.code == "server_error":
		return "", errSignInNeeded
	case err != nil:
		return "", err
	}
	var access string
	err = si.update(func(s *jsonObject) bool {
		old := map[string]any{}
		json.Unmarshal(s.get("tokens"), &old)
		merged := map[string]any{"refresh_token": state.refreshToken}
		for k, v := range tokens {
			merged[k] = v
		}
		if _, ok := merged["scope"]; !ok && old["scope"] != nil {
			merged["scope"] = old["scope"] // a refresh without scope keeps the grant's
		}
		access, _ = merged["access_token"].(string)
		rotated, _ := merged["refresh_token"].(string)
		si.secrets.add(access)
		si.secrets.add(rotated)
		s.set("tokens", jsonValue(merged))
		if expires, ok := tokens["expires_in"].(float64); ok {
			at := max(1, min(float64(si.now().UnixMilli())+expires*1000, maxExpiryMillis)) // 1: expired already
			s.set("tokensExpireAt", jsonValue(int64(at)))
		} else {
			s.del("tokensExpireAt")
		}
		return true
	})
	if err != nil {
		return "", err
	}
	return access, nil
}

// maxExpiryMillis bounds a token's expiry, in milliseconds since 1970
// (JavaScript's largest exact integer, which pi reads as written): one
// further on is kept as this far, never wrapped into the past.
const maxExpiryMillis = 1<<53 - 1

// storedSignIn is what a refresh reads of a server's state in
// mcp-auth.json; the rest of it is kept as pi wrote it.
type storedSignIn struct {
	accessToken, refreshToken string
	expiresAt                 time.Time // zero: no expiry stored
	client                    oauthClient
	clientRaw                 json.RawMessage
	authServer                string         // the authorization server pi found at sign-in
	metadata                  *oauthMetadata // its metadata, when pi kept it
	resource                  string         // the protected resource pi signed in to, when the server named one
	hasDiscovery              bool
}

type oauthClient struct {
	ID           string   `json:"client_id"`
	Secret       string   `json:"client_secret"`
	AuthMethod   string   `json:"token_endpoint_auth_method"`
	RedirectURIs []string `json:"redirect_uris"`
}

type oauthMetadata struct {
	TokenEndpoint    string   `json:"token_endpoint"`
	AuthMethods      []string `json:"token_endpoint_auth_methods_supported"`
	ClientDocuments  bool     `json:"client_id_metadata_document_supported"`
	IssuerInResponse bool     `json:"authorization_response_iss_parameter_supported"`
}

// load reads the server's state under the file's lock, by pi's key or
// the older one; the zero value when there is none (no file, no entry).
func (si *mcpSignIn) load() (storedSignIn, string, error) {
	if state, ok := si.loadUnlocked(); ok {
		return state, si.keys[0], nil
	}
	var state storedSignIn
	var key string
	err := si.withFile(func(file *jsonObject) bool {
		raw, moved := file.get(si.keys[0]), false
		if raw == nil {
			// The first server to read a state under the older key takes
			// it over, as pi does: no two names refresh one grant.
			if raw = file.get(si.keys[1]); raw != nil {
				file.del(si.keys[1])
				file.set(si.keys[0], raw)
				moved = true
			}
		}
		key = si.keys[0]
		var s jsonObject
		if raw == nil || json.Unmarshal(raw, &s) != nil {
			return moved
		}
		state = si.readSignIn(&s)
		return moved
	})
	return state, key, err
}

// loadUnlocked reads the server's state without pi's lock on the file:
// ok when the file is a whole JSON object that holds it under its key,
// or holds nothing under either key (no sign-in, nothing to move). The
// lock is for changing the file: rpi replaces it whole, and a read that
// meets a file pi is still writing does not parse and is done again
// under the lock (load). Each read took the lock, and as a session's
// servers all connected at once, one that waited past mcpAuthLockWait
// sent its requests without its token.
func (si *mcpSignIn) loadUnlocked() (state storedSignIn, ok bool) {
	path, err := filepath.EvalSymlinks(si.file)
	if err != nil {
		return state, false
	}
	data, err := readSmallFile(path)
	var file jsonObject
	if err != nil || json.Unmarshal(data, &file) != nil {
		return state, false
	}
	raw := file.get(si.keys[0])
	if raw == nil {
		return state, file.get(si.keys[1]) == nil
	}
	var s jsonObject
	if json.Unmarshal(raw, &s) != nil {
		return state, false
	}
	return si.readSignIn(&s), true
}

// si.readSignIn is readSignIn, its keys told to the session's
// redactor.
func (si *mcpSignIn) readSignIn(s *jsonObject) storedSignIn {
	state := readSignIn(s)
	for _, secret := range []string{state.accessToken, state.refreshToken, state.client.Secret} {
		si.secrets.add(secret)
	}
	return state
}

// readSignIn takes what a refresh uses out of a server's state; a field
// of the wrong type counts as absent.
func readSignIn(s *jsonObject) storedSignIn {
	var st storedSignIn
	var tokens struct {
		Access  any `json:"access_token"`
		Refresh any `json:"refresh_token"`
	}
	unmarshalExact(s.get("tokens"), &tokens)
	st.accessToken, _ = tokens.Access.(string)
	st.refreshToken, _ = tokens.Refresh.(string)
	var expires float64
	if json.Unmarshal(s.get("tokensExpireAt"), &expires) == nil && expires > 0 {
		st.expiresAt = time.UnixMilli(int64(min(expires, maxExpiryMillis)))
	}
	st.clientRaw = s.get("clientInformation")
	unmarshalExact(st.clientRaw, &st.client)
	var discovery struct {
		AuthServer string         `json:"authorizationServerUrl"`
		Metadata   *oauthMetadata `json:"authorizationServerMetadata"`
		Resource   *struct {
			Resource string `json:"resource"`
		} `json:"resourceMetadata"`
	}
	if raw := s.get("discovery"); raw != nil && unmarshalExact(raw, &discovery) == nil {
		st.hasDiscovery = discovery.AuthServer != ""
		st.authServer, st.metadata = discovery.AuthServer, discovery.Metadata
		if discovery.Resource != nil {
			st.resource = discovery.Resource.Resource
		}
	}
	return st
}

// requestTokens asks the authorization server for new tokens with the
// stored refresh token, as the client the user signed in as: the one the
// entry configures, the one pi registered, or pi's Client ID Metadata
// Document. The answer's fields, as the server sent them.
// Each request takes at most oauthRequestLimit, less than a lock lives
// unrenewed: renew is called between them.
func (si *mcpSignIn) requestTokens(ctx context.Context, state storedSignIn, renew func()) (map[string]any, error) {
	metadata, authServer := state.metadata, state.authServer
	if si.oauth.metadataURL != "" {
		var err error
		renew()
		if metadata, err = si.fetchMetadata(ctx, si.oauth.metadataURL); err != nil {
			return nil, err
		}
	} else if !state.hasDiscovery {
		return nil, errSignInNeeded // pi keeps what it found at sign-in; without it, sign in again
	}
	if si.oauth.secretOf != nil {
		secret, err := si.oauth.secretOf()
		if err != nil {
			return nil, fmt.Errorf("oauth.clientSecret: its command %v", err)
		}
		si.oauth.secret = secret // refreshes of one connection take turns: no other reads it now
		si.secrets.add(secret)
	}
	client, ok := si.clientFor(state, metadata)
	if !ok {
		return nil, errSignInNeeded
	}
	endpoint := ""
	if metadata != nil {
		endpoint = metadata.TokenEndpoint
	} else if base, err := url.Parse(authServer); err == nil {
		endpoint = base.ResolveReference(&url.URL{Path: "/token"}).String()
	}
	if err := checkOAuthEndpoint("the authorization server's token endpoint", endpoint); err != nil {
		return nil, err
	}
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {state.refreshToken}}
	if si.oauth.metadataURL != "" {
		renew()
		state.resource = si.fetchResource(ctx) // pi keeps no discovery then: it asks the server each time
	}
	if state.resource != "" {
		if err := sameResource(si.url, state.resource); err != nil {
			return nil, err
		}
		form.Set("resource", state.resource)
	}
	var methods []string
	if metadata != nil {
		methods = metadata.AuthMethods
	}
	header := http.Header{"Accept": {"application/json"}, "Content-Type": {"application/x-www-form-urlencoded"}}
	if clientAuthMethod(client, methods) == "client_secret_basic" {
		header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(client.ID+":"+client.Secret)))
	} else {
		form.Set("client_id", client.ID)
		if client.Secret != "" && clientAuthMethod(client, methods) == "client_secret_post" {
			form.Set("client_secret", client.Secret)
		}
	}
	renew()
	ctx, cancel := context.WithTimeout(ctx, oauthRequestLimit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header = header
	resp, err := si.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the authorization server cannot be reached: %v", withoutURL(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the authorization server's answer: %v", err)
	}
	var answer map[string]any
	json.Unmarshal(body, &answer)
	// Servers report OAuth errors with any status: the body first.
	if code, ok := answer["error"].(string); ok {
		desc, _ := answer["error_description"].(string)
		// The server may echo what it was sent: the form, URL-encoded.
		for _, secret := range []string{state.refreshToken, state.accessToken, client.Secret} {
			for _, form := range secretForms(secret) {
				if len(secret) >= 4 && form != "" {
					desc = strings.ReplaceAll(desc, form, "[redacted]")
					code = strings.ReplaceAll(code, form, "[redacted]")
				}
			}
		}
		return nil, &oauthError{code: code, description: desc}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &oauthError{code: "server_error", description: "HTTP " + strconv.Itoa(resp.StatusCode)}
	}
	return checkTokens(answer)
}

// checkTokens is the token answer as pi keeps it: access_token and
// token_type strings, expires_in a finite number (a string of one is taken),
// the optional strings dropped when empty; an answer without them fails.
func checkTokens(answer map[string]any) (map[string]any, error) {
	tokens := map[string]any{}
	for _, k := range []string{"access_token", "token_type"} {
		v, ok := answer[k].(string)
		if !ok || v == "" {
			return nil, fmt.Errorf("the authorization server's answer has no %s", k)
		}
		tokens[k] = v
	}
	switch v := answer["expires_in"].(type) {
	case float64:
		tokens["expires_in"] = v
	case string:
		if v != "" {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil || math.IsNaN(n) || math.IsInf(n, 0) { // "NaN", "Infinity": no number JSON holds
				return nil, errors.New("the authorization server's answer has an invalid expires_in")
			}
			tokens["expires_in"] = n
		}
	case nil:
	default:
		return nil, errors.New("the authorization server's answer has an invalid expires_in")
	}
	for _, k := range []string{"scope", "refresh_token", "id_token"} {
		switch v := answer[k].(type) {
		case string:
			if v != "" {
				tokens[k] = v
			}
		case nil:
		default:
			return nil, fmt.Errorf("the authorization server's answer has an invalid %s", k)
		}
	}
	return tokens, nil
}

// clientFor is the client the refresh speaks as, as pi chooses it: the
// entry's clientId, the client pi stored, or pi's Client ID Metadata
// Document when the entry lets pi use one and the server takes it.
func (si *mcpSignIn) clientFor(state storedSignIn, metadata *oauthMetadata) (oauthClient, bool) {
	o := si.oauth
	switch {
	case o.clientID != "":
		return oauthClient{ID: o.clientID, Secret: o.secret}, true
	case state.client.ID != "":
		return state.client, true
	}
	redirect := oauthDefaultReturn
	for _, candidate := range append([]string{o.fixedRedirect()}, state.client.RedirectURIs...) {
		if candidate != "" && piListsRedirect(candidate) {
			redirect = candidate
			break
		}
	}
	documents := o.registration == "cimd" ||
		(o.registration == "" || o.registration == "auto") && o.clientName == "" && piListsRedirect(redirect)
	if !documents || metadata == nil || !metadata.ClientDocuments || !slices.Contains(metadata.AuthMethods, "none") {
		return oauthClient{}, false
	}
	if metadata.IssuerInResponse {
		return oauthClient{ID: piClientDocuments + "/client.json", AuthMethod: "none"}, true
	}
	return oauthClient{ID: piClientDocuments + "/" + callbackID(si.url) + "/client.json", AuthMethod: "none"}, true
}

// fixedRedirect is the redirect URI the entry's callback settings fix,
// "" when they leave the port open.
func (o mcpOAuthSettings) fixedRedirect() string {
	configured := cmp.Or(o.callbackURL, oauthDefaultReturn)
	u, err := url.Parse(configured)
	switch {
	case err != nil:
		return ""
	case u.Port() != "":
		return o.callbackURL
	case o.callbackPort > 0:
		u.Host = net.JoinHostPort(strings.Trim(u.Hostname(), "[]"), strconv.Itoa(o.callbackPort))
		return u.String()
	}
	return ""
}

// piListsRedirect reports whether pi's documents list the redirect URI:
// a /callback path, not on [::1].
func piListsRedirect(redirect string) bool {
	u, err := url.Parse(redirect)
	return err == nil && u.Host != "[::1]" && !strings.HasPrefix(u.Host, "[::1]:") && u.Path == "/callback"
}

// callbackID is the 12 characters by which pi's server-specific document
// names an MCP server's URL.
func callbackID(serverURL string) string {
	u, err := url.Parse(serverURL)
	if err == nil {
		u.Fragment, u.RawFragment = "", ""
		serverURL = u.String()
	}
	sum := sha256.Sum256([]byte(serverURL))
	return base64.RawURLEncoding.EncodeToString(sum[:9])
}

// clientAuthMethod is how the client proves itself to the token
// endpoint, chosen as pi (the MCP SDK) chooses it.
func clientAuthMethod(c oauthClient, supported []string) string {
	if m := c.AuthMethod; (m == "client_secret_basic" || m == "client_secret_post" || m == "none") &&
		(len(supported) == 0 || slices.Contains(supported, m)) {
		return m
	}
	switch {
	case len(supported) == 0 && c.Secret != "":
		return "client_secret_basic"
	case len(supported) == 0:
		return "none"
	case c.Secret != "" && slices.Contains(supported, "client_secret_basic"):
		return "client_secret_basic"
	case c.Secret != "" && slices.Contains(supported, "client_secret_post"):
		return "client_secret_post"
	case slices.Contains(supported, "none"):
		return "none"
	case c.Secret != "":
		return "client_secret_post"
	}
	return "none"
}

// fetchResource is the protected resource the server names in its
// metadata (RFC 9728: /.well-known/oauth-protected-resource with the
// server's path, then without it); "" when it names none.
func (si *mcpSignIn) fetchResource(ctx context.Context) string {
	u, err := url.Parse(si.url)
	if err != nil {
		return ""
	}
	for _, p := range []string{"/.well-known/oauth-protected-resource" + strings.TrimSuffix(u.EscapedPath(), "/"), "/.well-known/oauth-protected-resource"} {
		var doc struct {
			Resource string `json:"resource"`
		}
		if si.getJSON(ctx, (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: p}).String(), &doc) == nil && doc.Resource != "" {
			return doc.Resource
		}
	}
	return ""
}

// getJSON reads the JSON document at address into v (at most 1 MiB, in
// at most oauthRequestLimit).
func (si *mcpSignIn) getJSON(ctx context.Context, address string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, oauthRequestLimit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, address, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := si.client.Do(req)
	if err != nil {
		return withoutURL(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return json.Unmarshal(body, v)
}

// fetchMetadata reads the authorization server metadata the entry names
// (authServerMetadataUrl).
func (si *mcpSignIn) fetchMetadata(ctx context.Context, address string) (*oauthMetadata, error) {
	if err := checkOAuthEndpoint("the authorization server's metadata (oauth.authServerMetadataUrl)", address); err != nil {
		return nil, err
	}
	var m oauthMetadata
	if err := si.getJSON(ctx, address, &m); err != nil {
		return nil, fmt.Errorf("the authorization server's metadata (oauth.authServerMetadataUrl) cannot be read: %v", err)
	}
	if m.TokenEndpoint == "" {
		return nil, errors.New("the authorization server's metadata (oauth.authServerMetadataUrl) has no token endpoint")
	}
	return &m, nil
}

// checkOAuthEndpoint refuses to send a refresh token, or ask for the
// metadata that names where one goes, anywhere but https, or http on
// this machine; what names the address in the error.
func checkOAuthEndpoint(what, address string) error {
	u, err := url.Parse(address)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%s is not a valid URL", what)
	}
	if u.Scheme == "https" || u.Scheme == "http" && isLoopbackHost(u.Hostname()) {
		return nil
	}
	return fmt.Errorf("%s is not https (%s://%s)", what, u.Scheme, u.Host)
}

// withoutURL is a request's error without the URL, which may hold a key.
func withoutURL(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err
	}
	return err
}

// jsonValue is v as JSON (a value rpi made, which always encodes).
func jsonValue(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func isLoopbackHost(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}

// sameResource checks that the protected resource pi signed in to is the
// server's URL or a parent of it, as pi checks: the same origin (scheme
// and host as a browser writes them), the server's path under the
// resource's, both percent-encoded.
func sameResource(serverURL, resource string) error {
	s, err1 := url.Parse(serverURL)
	r, err2 := url.Parse(resource)
	under := func() bool {
		sp, rp := strings.TrimSuffix(s.EscapedPath(), "/")+"/", strings.TrimSuffix(r.EscapedPath(), "/")+"/"
		return strings.HasPrefix(sp, rp)
	}
	if err1 != nil || err2 != nil || originOf(s) != originOf(r) || !under() {
		return fmt.Errorf("the stored protected resource %s does not match the server's URL", escapeControl(resource))
	}
	return nil
}

// originOf is u's scheme and host as a browser writes them: lower case,
// without the scheme's default port.
func originOf(u *url.URL) string {
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if scheme == "http" && port == "80" || scheme == "https" && port == "443" {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host
}

// whatwgURL is u written as a browser (pi's new URL) writes it: origin
// as originOf, dot segments resolved, "/" for an empty path.
func whatwgURL(u *url.URL) string {
	out := *u
	origin := originOf(u)
	out.Scheme = strings.ToLower(u.Scheme)
	out.Host = strings.TrimPrefix(origin, out.Scheme+"://")
	if out.Path == "" {
		out.Path, out.RawPath = "/", ""
	} else if strings.Contains(out.Path, ".") {
		cleaned := path.Clean(out.Path)
		if strings.HasSuffix(out.Path, "/") || strings.HasSuffix(out.Path, "/.") || strings.HasSuffix(out.Path, "/..") {
			cleaned = strings.TrimSuffix(cleaned, "/") + "/"
		}
		out.Path, out.RawPath = cleaned, ""
	}
	return out.String()
}

// oauthError is an error the authorization server answered.
type oauthError struct{ code, description string }

func (e *oauthError) Error() string {
	text := "the authorization server refused the refresh: " + escapeControl(clip(e.code, 80))
	if e.description != "" && e.description != e.code {
		text += " (" + escapeControl(clip(e.description, 200)) + ")"
	}
	return text
}

// update changes the server's state in mcp-auth.json under the file's
// lock, at its key (a state under the older key moves to pi's, as pi
// moves it). change reports whether it changed anything.
func (si *mcpSignIn) update(change func(s *jsonObject) bool) error {
	return si.withFile(func(file *jsonObject) bool {
		key := si.keys[0]
		raw := file.get(key)
		if raw == nil {
			if raw = file.get(si.keys[1]); raw != nil {
				file.del(si.keys[1])
			}
		}
		var s jsonObject
		if raw == nil || json.Unmarshal(raw, &s) != nil || !change(&s) {
			return false
		}
		file.set(key, jsonValue(&s))
		return true
	})
}

// withFile reads mcp-auth.json under pi's lock of it and, when use
// reports a change, writes it back (whole: a new file renamed over the
// old, so that a crash leaves one or the other). No file: nothing is
// read or written.
func (si *mcpSignIn) withFile(use func(file *jsonObject) bool) error {
	path, err := filepath.EvalSymlinks(si.file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	lock, err := piLock(context.Background(), path, mcpAuthLockStale, mcpAuthLockWait)
	if err != nil {
		return err
	}
	defer lock.unlock()
	data, err := readSmallFile(path)
	if err != nil {
		return err
	}
	var file jsonObject
	if len(bytes.TrimSpace(data)) > 0 && json.Unmarshal(data, &file) != nil {
		return errors.New("mcp-auth.json is not a JSON object")
	}
	if !use(&file) {
		return nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(&file); err != nil {
		return err
	}
	return writeFileWhole(path, buf.Bytes(), 0o600)
}

// piLock takes the lock pi (proper-lockfile) takes on path: the directory
// path+".lock", made at once or not at all. A lock older than stale was
// left by a process that died and is taken over (its holder renews it
// meanwhile). It waits up to wait, trying every piLockRetry, and ends the
// wait when ctx ends.
func piLock(ctx context.Context, path string, stale, wait time.Duration) (piLockHeld, error) {
	lock := path + ".lock"
	deadline := time.Now().Add(wait)
	for {
		err := os.Mkdir(lock, 0o700)
		if err == nil {
			return piLockHeld{lock}, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return piLockHeld{}, err
		}
		if info, err := os.Stat(lock); err == nil && time.Since(info.ModTime()) > stale {
			os.Remove(lock) // its holder died; take it (another taker may be first)
			continue
		}
		if time.Now().After(deadline) {
			return piLockHeld{}, fmt.Errorf("another process holds %s", filepath.Base(lock))
		}
		select {
		case <-ctx.Done():
			return piLockHeld{}, ctx.Err()
		case <-time.After(piLockRetry):
		}
	}
}

// piLockHeld is a lock piLock took.
type piLockHeld struct{ dir string }

// renew tells other takers that its holder lives.
func (l piLockHeld) renew() {
	now := time.Now()
	os.Chtimes(l.dir, now, now)
}

func (l piLockHeld) unlock() { os.Remove(l.dir) }
