package options

import (
	"strings"
	"testing"
)

func TestUnusableKubeconfigIsRejectedAtFlagTimeNamingTheFile(t *testing.T) {
	const base = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: %SERVER%
%CA%users:
- name: u
  user:
    token: abc
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`
	kubeconfig := func(server, ca string) string {
		return strings.NewReplacer("%SERVER%", server, "%CA%", ca).Replace(base)
	}
	tests := []struct {
		name    string
		content string
		want    string // "" means valid
	}{
		{"valid", kubeconfig("https://127.0.0.1:6443", ""), ""},
		{"server is not a URL", kubeconfig(`"https//127.0.0.1:6443"`, ""), "host must be a URL or a host:port pair"},
		{"certificate authority is not PEM", kubeconfig("https://127.0.0.1:6443",
			"    certificate-authority-data: bm90IGEgY2VydGlmaWNhdGU=\n"), "unable to load root certificates"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := testRegistry(t)
			path := writeFile(t, "kubeconfig", tc.content)
			errs := parse(t, reg, "--kubeconfig", path).Validate(reg)
			if tc.want == "" {
				if len(errs) != 0 {
					t.Fatalf("a valid kubeconfig was rejected: %v", errs)
				}
				return
			}
			if len(errs) != 1 {
				t.Fatalf("got errors %v, want exactly one", errs)
			}
			for _, want := range []string{tc.want, `--kubeconfig="` + path + `"`, "is unusable"} {
				if !strings.Contains(errs[0].Error(), want) {
					t.Errorf("error %q does not contain %q", errs[0], want)
				}
			}
		})
	}
}
