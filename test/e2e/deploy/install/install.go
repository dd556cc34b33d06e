// Package install puts the manifests of deploy/ on a cluster the way an operator would,
// without kubectl: it reads a kustomization's file list, applies every object with
// server-side apply, and mints a kubeconfig for a ServiceAccount through the TokenRequest
// API, so that mini-kcm runs with exactly the RBAC the manifests grant.
//
// A kustomization is built with kustomize's library and kubectl's defaults, as
// `kubectl apply -k` builds it (deploy/ uses Components and an images transformer, so its
// files alone are not what kubectl applies).
package install

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Manifest is one object of a manifest file, exactly as written there.
type Manifest struct {
	// File is the path of the file that holds the object.
	File string
	// Object is the decoded object; callers read it, Apply sends JSON.
	Object *unstructured.Unstructured
	// json is the document as written, converted from YAML; it is what Apply sends, so
	// that the apiserver validates the file and not what a Go type kept of it.
	json []byte
}

// String names the object and its file, for messages.
func (m Manifest) String() string {
	name := m.Object.GetName()
	if ns := m.Object.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return fmt.Sprintf("%s %s (%s)", m.Object.GetKind(), name, m.File)
}

// kustomization is the part of kustomization.yaml that names files: resources and
// components (files or directories). Transformers (images, patches) are kustomize's
// business; LoadKustomization applies them.
type kustomization struct {
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
	Components []string `json:"components"`
}

// KustomizationFiles returns the manifest files the kustomization in dir applies, in
// order (resources, then components), following directories recursively: the files an
// operator reviews. What is applied is LoadKustomization's build of them.
func KustomizationFiles(dir string) ([]string, error) {
	path := filepath.Join(dir, "kustomization.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the kustomization: %w", err)
	}
	var k kustomization
	if err := utilyaml.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if k.Kind != "Kustomization" && k.Kind != "Component" {
		return nil, fmt.Errorf("%s: kind is %q, want Kustomization or Component", path, k.Kind)
	}
	var files []string
	for _, r := range append(k.Resources, k.Components...) {
		resource := filepath.Join(dir, r)
		info, err := os.Stat(resource)
		if err != nil {
			return nil, fmt.Errorf("%s lists %q: %w", path, r, err)
		}
		if !info.IsDir() {
			files = append(files, resource)
			continue
		}
		nested, err := KustomizationFiles(resource)
		if err != nil {
			return nil, err
		}
		files = append(files, nested...)
	}
	return files, nil
}

// LoadKustomization returns every object of the kustomization in dir, built as
// `kubectl apply -k dir` builds it: kustomize's library with kubectl's defaults (files
// only from within the kustomization's directory, no plugins). Each Manifest's File is
// dir.
func LoadKustomization(dir string) ([]Manifest, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), abs)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	out, err := resources.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("rendering the build of %s: %w", dir, err)
	}
	return loadDocuments(dir, out)
}

// LoadFile returns every object of a multi-document YAML file; documents holding only
// comments are skipped.
func LoadFile(path string) ([]Manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading manifest: %w", err)
	}
	return loadDocuments(path, data)
}

// loadDocuments decodes the YAML documents of data, read from path.
func loadDocuments(path string, data []byte) ([]Manifest, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var manifests []Manifest
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("splitting %s into documents: %w", path, err)
		}
		json, err := utilyaml.ToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if string(bytes.TrimSpace(json)) == "null" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(json); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		manifests = append(manifests, Manifest{File: path, Object: obj, json: json})
	}
	if len(manifests) == 0 {
		return nil, fmt.Errorf("%s holds no object", path)
	}
	return manifests, nil
}

// Applier applies manifests with server-side apply.
type Applier struct {
	// FieldManager owns the applied fields, as kubectl's "kubectl" does.
	FieldManager string
	dynamic      dynamic.Interface
	mapper       meta.RESTMapper
}

// NewApplier returns an Applier for the cluster of cfg. It reads the API groups once,
// so every resource the manifests use must be served by then.
func NewApplier(cfg *rest.Config, fieldManager string) (*Applier, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating a dynamic client: %w", err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating a discovery client: %w", err)
	}
	groups, err := restmapper.GetAPIGroupResources(disco)
	if err != nil {
		return nil, fmt.Errorf("discovering the API groups: %w", err)
	}
	return &Applier{FieldManager: fieldManager, dynamic: dyn, mapper: restmapper.NewDiscoveryRESTMapper(groups)}, nil
}

// ApplyOptions change how Apply sends its patches.
type ApplyOptions struct {
	// DryRun asks the apiserver to validate and admit the objects without storing
	// them.
	DryRun bool
}

// Apply applies each manifest in order, as `kubectl apply --server-side
// --force-conflicts` does: strict field validation (an unknown or duplicated field is
// an error, not dropped) and forced ownership of the fields it sets. It returns the
// objects as stored.
func (a *Applier) Apply(ctx context.Context, manifests []Manifest, opts ApplyOptions) ([]*unstructured.Unstructured, error) {
	var applied []*unstructured.Unstructured
	for _, m := range manifests {
		client, err := a.resourceFor(m.Object)
		if err != nil {
			return applied, fmt.Errorf("%s: %w", m, err)
		}
		patch := metav1.PatchOptions{
			FieldManager:    a.FieldManager,
			Force:           new(true),
			FieldValidation: metav1.FieldValidationStrict,
		}
		if opts.DryRun {
			patch.DryRun = []string{metav1.DryRunAll}
		}
		obj, err := client.Patch(ctx, m.Object.GetName(), types.ApplyPatchType, m.json, patch)
		if err != nil {
			return applied, fmt.Errorf("applying %s: %w", m, err)
		}
		applied = append(applied, obj)
	}
	return applied, nil
}

// Get reads the stored version of a manifest's object.
func (a *Applier) Get(ctx context.Context, m Manifest) (*unstructured.Unstructured, error) {
	client, err := a.resourceFor(m.Object)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m, err)
	}
	return client.Get(ctx, m.Object.GetName(), metav1.GetOptions{})
}

// Delete deletes the manifests' objects, in reverse order, ignoring those already gone.
func (a *Applier) Delete(ctx context.Context, manifests []Manifest) error {
	var errs []error
	for i := len(manifests) - 1; i >= 0; i-- {
		m := manifests[i]
		client, err := a.resourceFor(m.Object)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m, err))
			continue
		}
		if err := client.Delete(ctx, m.Object.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting %s: %w", m, err))
		}
	}
	return errors.Join(errs...)
}

// resourceFor maps an object to its resource client, namespaced or not as its kind is.
func (a *Applier) resourceFor(obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("the apiserver does not serve %s: %w", gvk, err)
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		return a.dynamic.Resource(mapping.Resource), nil
	}
	if obj.GetNamespace() == "" {
		return nil, errors.New("a namespaced object without metadata.namespace: every manifest names its namespace")
	}
	return a.dynamic.Resource(mapping.Resource).Namespace(obj.GetNamespace()), nil
}

// ServiceAccountKubeconfig asks the TokenRequest API for a token of the ServiceAccount
// namespace/name, valid for expiration, and writes a kubeconfig at path that
// authenticates with it: the identity a pod of that ServiceAccount has. The server and
// CA come from adminKubeconfig. The token is not bound to a pod, so it stays valid
// until it expires or the ServiceAccount is deleted.
func ServiceAccountKubeconfig(ctx context.Context, client kubernetes.Interface, adminKubeconfig, namespace, name, path string, expiration time.Duration) error {
	admin, err := clientcmd.LoadFromFile(adminKubeconfig)
	if err != nil {
		return fmt.Errorf("reading the admin kubeconfig: %w", err)
	}
	current, ok := admin.Contexts[admin.CurrentContext]
	if !ok {
		return fmt.Errorf("the admin kubeconfig %s has no current context", adminKubeconfig)
	}
	cluster, ok := admin.Clusters[current.Cluster]
	if !ok {
		return fmt.Errorf("the admin kubeconfig %s has no cluster %q", adminKubeconfig, current.Cluster)
	}

	seconds := int64(expiration / time.Second)
	token, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}},
		metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", namespace, name, err)
	}

	user := ServiceAccountUser(namespace, name)
	config := clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{current.Cluster: {
			Server:                   cluster.Server,
			CertificateAuthorityData: cluster.CertificateAuthorityData,
			CertificateAuthority:     cluster.CertificateAuthority,
		}},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{user: {Token: token.Status.Token}},
		Contexts: map[string]*clientcmdapi.Context{user: {
			Cluster:  current.Cluster,
			AuthInfo: user,
		}},
		CurrentContext: user,
	}
	if err := clientcmd.WriteToFile(config, path); err != nil {
		return fmt.Errorf("writing the kubeconfig of ServiceAccount %s/%s: %w", namespace, name, err)
	}
	return nil
}

// ServiceAccountUser is the user name a ServiceAccount's tokens authenticate as.
func ServiceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// KubeconfigCredentialID returns the credential ID ("JTI=<jti>") of the ServiceAccount
// token in a kubeconfig that ServiceAccountKubeconfig wrote: the audit log records it in
// user.extra of every request made with the token, which tells apart the replicas that
// share one ServiceAccount.
func KubeconfigCredentialID(path string) (string, error) {
	config, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return "", err
	}
	current, ok := config.Contexts[config.CurrentContext]
	if !ok || config.AuthInfos[current.AuthInfo] == nil {
		return "", fmt.Errorf("kubeconfig %s has no user for its current context", path)
	}
	// A JWT is header.payload.signature, each base64url without padding; the payload's
	// jti claim is the token's ID. The signature is the apiserver's business.
	parts := strings.Split(config.AuthInfos[current.AuthInfo].Token, ".")
	if len(parts) != 3 {
		return "", fmt.Errorf("the token in kubeconfig %s is not a JWT", path)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", fmt.Errorf("decoding the token in kubeconfig %s: %w", path, err)
	}
	var claims struct {
		JTI string `json:"jti"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.JTI == "" {
		return "", fmt.Errorf("the token in kubeconfig %s has no jti claim (%v)", path, err)
	}
	return "JTI=" + claims.JTI, nil
}
