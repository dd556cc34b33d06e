package controlplane

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// AuditEvent is the part of an audit.k8s.io/v1 Event that tests look at: who made
// which request, when, and how it ended. (The full type lives in k8s.io/apiserver,
// which the module does not depend on.)
type AuditEvent struct {
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	RequestURI string `json:"requestURI"`
	Verb       string `json:"verb"`
	User       struct {
		Username string   `json:"username"`
		Groups   []string `json:"groups"`
		// Extra holds, for a token of the TokenRequest API, its credential ID
		// (CredentialIDKey), which tells apart requests made as one user.
		Extra map[string][]string `json:"extra"`
	} `json:"user"`
	// ImpersonatedUser is who the request acted as, when it impersonated a user:
	// mini-kcm's controllers impersonate themselves to carry the lease-holder extra
	// (--leader-elect-apiserver-fence). User stays the authenticated user.
	ImpersonatedUser *struct {
		Username string              `json:"username"`
		Groups   []string            `json:"groups"`
		Extra    map[string][]string `json:"extra"`
	} `json:"impersonatedUser"`
	// Annotations holds, on a TokenRequest, the credential ID of the token it issued
	// (IssuedCredentialIDAnnotation).
	Annotations map[string]string `json:"annotations"`
	UserAgent   string            `json:"userAgent"`
	ObjectRef   *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		APIVersion  string `json:"apiVersion"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int32 `json:"code"`
	} `json:"responseStatus"`
	// ResponseObject is the object the apiserver answered with, for the requests the
	// policy records with their bodies (writes of Leases); nil for the others.
	ResponseObject           json.RawMessage `json:"responseObject"`
	RequestReceivedTimestamp time.Time       `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time       `json:"stageTimestamp"`
	// By is who made the request as the tests know it: ReadAuditLog sets it to
	// User.Username; test/e2e/framework's AuditLog sets it, for the requests of a
	// replica that authenticates as a ServiceAccount all replicas share, to the
	// replica's own name.
	By string `json:"-"`
}

// The audit log's keys for the credential IDs of ServiceAccount tokens, "JTI=<jti>".
const (
	CredentialIDKey              = "authentication.kubernetes.io/credential-id"
	IssuedCredentialIDAnnotation = "authentication.kubernetes.io/issued-credential-id"
)

// CredentialID returns the credential ID of the token the request was made with, or "".
func (e *AuditEvent) CredentialID() string {
	if ids := e.User.Extra[CredentialIDKey]; len(ids) > 0 {
		return ids[0]
	}
	return ""
}

// Resource returns the resource of the request, with "/subresource" when there is
// one (e.g. "pods/status"), or "" for a non-resource URL.
func (e *AuditEvent) Resource() string {
	if e.ObjectRef == nil {
		return ""
	}
	if e.ObjectRef.Subresource != "" {
		return e.ObjectRef.Resource + "/" + e.ObjectRef.Subresource
	}
	return e.ObjectRef.Resource
}

// Code returns the HTTP status of the response, or 0 if there is none.
func (e *AuditEvent) Code() int32 {
	if e.ResponseStatus == nil {
		return 0
	}
	return e.ResponseStatus.Code
}

// ReadAuditLog parses the audit log written so far. The apiserver may be writing the
// last line at this very moment, so a truncated last line is skipped, not an error.
func (cp *ControlPlane) ReadAuditLog() ([]AuditEvent, error) {
	return readAuditLog(cp.AuditLogPath())
}

func readAuditLog(path string) ([]AuditEvent, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading audit log: %w", err)
	}
	// Drop a last line that the apiserver has not finished writing.
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	var events []AuditEvent
	scanner := bufio.NewScanner(bytes.NewReader(data))
	scanner.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for line := 1; scanner.Scan(); line++ {
		var e AuditEvent
		if err := json.Unmarshal(scanner.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("audit log %s line %d: %w", path, line, err)
		}
		e.By = e.User.Username
		events = append(events, e)
	}
	return events, scanner.Err()
}
