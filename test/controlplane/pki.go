package controlplane

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"slices"
	"time"
)

// certificateAuthority signs the serving certificate of the apiserver and the client
// certificates of every user. One CA serves both purposes: the harness is the only
// party that ever holds its key, and it lives only as long as the control plane.
type certificateAuthority struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
}

// newCertificateAuthority creates a self-signed CA. ECDSA P-256 keys are generated in
// microseconds, unlike RSA, which keeps AddUser cheap.
func newCertificateAuthority() (*certificateAuthority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "mini-kcm-test-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("self-signing CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing CA certificate: %w", err)
	}
	return &certificateAuthority{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
	}, nil
}

// keyPair is a PEM-encoded certificate and private key.
type keyPair struct {
	certPEM []byte
	keyPEM  []byte
}

// issue signs a certificate for subject. Serving certificates get the loopback
// addresses, extraIPs and the kubernetes Service's DNS names (pods on the local node
// reach the apiserver by those); client certificates carry the user in CN and the
// groups in O, which is how the apiserver's x509 authenticator reads them.
func (ca *certificateAuthority) issue(subject pkix.Name, usage x509.ExtKeyUsage, extraIPs ...net.IP) (keyPair, error) {
	return ca.issueFor(subject, []x509.ExtKeyUsage{usage}, extraIPs...)
}

// issueFor is issue for a certificate of several usages: a serving certificate that
// also authenticates its holder as a client (etcd's peer certificate) gets both.
func (ca *certificateAuthority) issueFor(subject pkix.Name, usages []x509.ExtKeyUsage, extraIPs ...net.IP) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, fmt.Errorf("generating key for %q: %w", subject.CommonName, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return keyPair{}, fmt.Errorf("generating serial number: %w", err)
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usages,
	}
	if slices.Contains(usages, x509.ExtKeyUsageServerAuth) {
		template.DNSNames = []string{"localhost", "kubernetes", "kubernetes.default",
			"kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
		template.IPAddresses = append([]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, extraIPs...)
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca.cert, key.Public(), ca.key)
	if err != nil {
		return keyPair{}, fmt.Errorf("signing certificate for %q: %w", subject.CommonName, err)
	}
	keyPEM, err := encodePrivateKey(key)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  keyPEM,
	}, nil
}

// newServiceAccountKey returns a PEM-encoded private key for signing service account
// tokens; the apiserver derives the verification key from it.
func newServiceAccountKey() ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating service account key: %w", err)
	}
	return encodePrivateKey(key)
}

func encodePrivateKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// writeFiles writes each path's content with owner-only permissions, as the files
// hold private keys.
func writeFiles(files map[string][]byte) error {
	for path, content := range files {
		if err := os.WriteFile(path, content, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return nil
}
