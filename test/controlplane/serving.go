package controlplane

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// CAFile returns the control plane's CA certificate, which signs the apiserver's and
// every serving and client certificate the harness issues.
func (cp *ControlPlane) CAFile() string { return cp.pkiPath("ca.crt") }

// WriteServingCertificate signs a serving certificate for localhost and the loopback
// addresses and writes it and its key to certFile and keyFile. Writing new files over
// old ones is how a test rotates a controller manager's certificate.
func (cp *ControlPlane) WriteServingCertificate(commonName, certFile, keyFile string) error {
	pair, err := cp.ca.issue(pkix.Name{CommonName: commonName}, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return err
	}
	return writeFiles(map[string][]byte{certFile: pair.certPEM, keyFile: pair.keyPEM})
}

// ClientCertificate signs a client certificate for user name in groups, as the
// apiserver's and a controller manager's x509 authenticators read them (CN user, O
// groups).
func (cp *ControlPlane) ClientCertificate(name string, groups ...string) (tls.Certificate, error) {
	pair, err := cp.ca.issue(pkix.Name{CommonName: name, Organization: groups}, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(pair.certPEM, pair.keyPEM)
}

// HTTPSClient returns a client that trusts the control plane's CA and presents cert
// (none if nil), for the HTTPS endpoints of controller managers serving with
// ServingFlags.
func (cp *ControlPlane) HTTPSClient(cert *tls.Certificate) *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(cp.ca.cert)
	config := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if cert != nil {
		config.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: config, ForceAttemptHTTP2: true},
	}
}

// ScrapeClient returns an HTTPS client with a client certificate for user name in
// system:masters, which a controller manager's authorizer allows everything
// (--authorization-always-allow-groups): what tests, benchmarks and local tools use to
// read /metrics, /readyz?verbose and /debug/pprof.
func (cp *ControlPlane) ScrapeClient(name string) (*http.Client, error) {
	cert, err := cp.ClientCertificate(name, "system:masters")
	if err != nil {
		return nil, err
	}
	return cp.HTTPSClient(&cert), nil
}

// ServingFlags returns the flags that make a controller manager (mini-kcm or
// kube-controller-manager) serve HTTPS on 127.0.0.1:port with a certificate signed by
// the control plane's CA, written as <name>-serving.{crt,key} in the control plane's
// pki directory, and delegate authentication and authorization to the apiserver as the
// user of kubeconfig, as a pod does with its in-cluster configuration.
func (cp *ControlPlane) ServingFlags(name string, port int, kubeconfig string) ([]string, error) {
	certFile, keyFile := cp.ServingCertFiles(name)
	if err := cp.WriteServingCertificate(name, certFile, keyFile); err != nil {
		return nil, fmt.Errorf("serving certificate for %s: %w", name, err)
	}
	return []string{
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + certFile,
		"--tls-private-key-file=" + keyFile,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
	}, nil
}

// ServingCertFiles returns where ServingFlags writes name's serving certificate and
// key, for tests that replace them.
func (cp *ControlPlane) ServingCertFiles(name string) (certFile, keyFile string) {
	return cp.pkiPath(name + "-serving.crt"), cp.pkiPath(name + "-serving.key")
}
