// Package rbacgen writes deploy/'s RBAC and the identities of the apiserver fence from the
// controller registry, as upstream keeps its controllers' roles in Go
// (bootstrappolicy's controller_policy.go) and checks the YAML against them.
//
// Each descriptor declares its ServiceAccount, the calls its own client makes and the
// resources it caches; from those this package generates, under deploy/:
//   - rbac/<controller>.yaml: the ServiceAccount, its ClusterRole and the binding;
//   - rbac/controller-manager.yaml: the process's list and watch of every cached resource;
//   - rbac/token-requests.yaml: TokenRequests for exactly the controllers' accounts;
//   - rbac/kustomization.yaml;
//   - fence/policy.yaml: the fenced resources (every write of a controller) and identities;
//   - fence/rbac.yaml: each account's grant to impersonate itself with the holder extra;
//   - sharded/fence/policy.yaml, bindings.yaml and rbac.yaml: the fence of the sharded
//     install, one binding per shard Lease of the overlay (its --shards and Lease name,
//     read from deploy/sharded/shards-patch.yaml and deploy/base/statefulset.yaml);
//   - in kind/kind-config.yaml, kind/demo.sh and README.md, the value of
//     kube-controller-manager's --controllers that leaves mini-kcm's controllers to it
//     (UpstreamControllers), rewritten in place.
//
// Outside deploy/, it generates the shard filter's typed wrappers for every cached
// namespaced resource (ShardFilterSource, sharding/zz_generated_filter.go).
//
// `make generate` (go run ./hack/gen-rbac) writes them; Check, run by deploy/'s unit
// tests, and the sharding package's tests fail when the committed files and the
// registry disagree.
package rbacgen

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"

	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/leaderelection"
)

const (
	// Namespace holds the controllers' ServiceAccounts, as upstream's.
	Namespace = "kube-system"
	// ProcessServiceAccount is the replicas' own ServiceAccount (deploy/serviceaccount.yaml)
	// and ProcessUser the static pods' certificate user (deploy/static-pod/): the
	// identities the fence matches besides the controllers'.
	ProcessServiceAccount = "mini-kcm"
	ProcessUser           = "system:mini-kcm"

	// controllerFiles matches the per-controller files: one that no registered
	// controller generates is stale (a controller removed or renamed).
	controllerFiles = "rbac/*-controller.yaml"
)

// File is one generated manifest.
type File struct {
	// Path is relative to deploy/, with forward slashes.
	Path    string
	Content []byte
}

// ClusterRoleName is the ClusterRole of a controller.
func ClusterRoleName(controller string) string { return "mini-kcm:" + controller }

// ShardedInstall is what the sharded overlay's fence is generated for: its number of
// shards and the Lease the replicas elect on, whose shard Leases are <name>-0 …
type ShardedInstall struct {
	Shards                    int
	LeaseNamespace, LeaseName string
}

// The files ReadShardedInstall reads, relative to deploy/.
const (
	shardsPatchFile     = "sharded/shards-patch.yaml"
	baseStatefulSetFile = "base/statefulset.yaml"
)

// ReadShardedInstall reads the sharded overlay's --shards from its patch, and the
// Lease flags from the patch or else from the base's StatefulSet (the later flag wins,
// as the patch appends).
func ReadShardedInstall(deployDir string) (ShardedInstall, error) {
	var values = map[string]string{}
	for _, rel := range []string{baseStatefulSetFile, shardsPatchFile} {
		data, err := os.ReadFile(filepath.Join(deployDir, filepath.FromSlash(rel)))
		if err != nil {
			return ShardedInstall{}, fmt.Errorf("reading the sharded install's flags: %w", err)
		}
		for _, m := range flagPattern.FindAllStringSubmatch(string(data), -1) {
			values[m[1]] = m[2]
		}
	}
	install := ShardedInstall{LeaseNamespace: values["leader-elect-resource-namespace"], LeaseName: values["leader-elect-resource-name"]}
	shards, err := strconv.Atoi(values["shards"])
	if err != nil || shards < 2 || install.LeaseNamespace == "" || install.LeaseName == "" {
		return ShardedInstall{}, fmt.Errorf("deploy/%s and deploy/%s must set --shards (above 1), --leader-elect-resource-namespace "+
			"and --leader-elect-resource-name; found %v", shardsPatchFile, baseStatefulSetFile, values)
	}
	install.Shards = shards
	return install, nil
}

// flagPattern matches the flags ReadShardedInstall reads, in a YAML list item or value.
var flagPattern = regexp.MustCompile(`(?m)^\s*(?:-\s*|value:\s*)--(shards|leader-elect-resource-namespace|leader-elect-resource-name)=(\S+)\s*$`)

// Generate returns every file generated from the registry, in a stable order; sharded
// is the sharded overlay the sharded fence's bindings are written for.
func Generate(reg *controllers.Registry, sharded ShardedInstall) []File {
	var files []File
	for _, d := range reg.Descriptors() {
		files = append(files, File{Path: "rbac/" + d.Name + ".yaml", Content: controllerFile(d)})
	}
	files = append(files,
		File{Path: "rbac/controller-manager.yaml", Content: processRoleFile(reg)},
		File{Path: "rbac/token-requests.yaml", Content: tokenRequestsFile(reg)},
		File{Path: "rbac/kustomization.yaml", Content: kustomizationFile(reg)},
		File{Path: "fence/policy.yaml", Content: fencePolicyFile(reg)},
		File{Path: "fence/rbac.yaml", Content: fenceRBACFile(reg)},
		File{Path: "sharded/fence/policy.yaml", Content: shardFencePolicyFile(reg)},
		File{Path: "sharded/fence/bindings.yaml", Content: shardFenceBindingsFile(sharded)},
		File{Path: "sharded/fence/rbac.yaml", Content: shardFenceRBACFile(reg)},
	)
	return files
}

// Write writes the generated files under deployDir and removes stale controller files.
func Write(reg *controllers.Registry, deployDir string) error {
	sharded, err := ReadShardedInstall(deployDir)
	if err != nil {
		return err
	}
	stamped, err := upstreamControllersStamped(reg, deployDir)
	if err != nil {
		return err
	}
	files := Generate(reg, sharded)
	for _, f := range append(slices.Clone(files), stamped...) {
		path := filepath.Join(deployDir, filepath.FromSlash(f.Path))
		if err := os.WriteFile(path, f.Content, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	stale, err := staleFiles(files, deployDir)
	if err != nil {
		return err
	}
	for _, path := range stale {
		if err := os.Remove(filepath.Join(deployDir, filepath.FromSlash(path))); err != nil {
			return fmt.Errorf("removing %s, which no registered controller generates: %w", path, err)
		}
	}
	return nil
}

// Check compares the files under deployDir with what the registry generates and returns
// one error per file that differs, is missing or is stale.
func Check(reg *controllers.Registry, deployDir string) error {
	sharded, err := ReadShardedInstall(deployDir)
	if err != nil {
		return err
	}
	stamped, err := upstreamControllersStamped(reg, deployDir)
	if err != nil {
		return err
	}
	files := Generate(reg, sharded)
	var errs []error
	for _, f := range append(slices.Clone(files), stamped...) {
		got, err := os.ReadFile(filepath.Join(deployDir, filepath.FromSlash(f.Path)))
		switch {
		case errors.Is(err, os.ErrNotExist):
			errs = append(errs, fmt.Errorf("deploy/%s is missing", f.Path))
		case err != nil:
			errs = append(errs, err)
		case !bytes.Equal(got, f.Content):
			errs = append(errs, fmt.Errorf("deploy/%s differs from what the controller registry generates:\n%s",
				f.Path, firstDifference(got, f.Content)))
		}
	}
	stale, err := staleFiles(files, deployDir)
	if err != nil {
		errs = append(errs, err)
	}
	for _, path := range stale {
		errs = append(errs, fmt.Errorf("deploy/%s is generated by no registered controller", path))
	}
	return errors.Join(errs...)
}

func staleFiles(generated []File, deployDir string) ([]string, error) {
	matches, err := filepath.Glob(filepath.Join(deployDir, filepath.FromSlash(controllerFiles)))
	if err != nil {
		return nil, err
	}
	var stale []string
	for _, m := range matches {
		rel, err := filepath.Rel(deployDir, m)
		if err != nil {
			return nil, err
		}
		rel = filepath.ToSlash(rel)
		if !slices.ContainsFunc(generated, func(f File) bool { return f.Path == rel }) {
			stale = append(stale, rel)
		}
	}
	return stale, nil
}

// firstDifference shows the first line that differs, enough to tell a hand edit from a
// changed descriptor.
func firstDifference(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("  line %d is   %q\n  generated: %q", i+1, gl, wl)
		}
	}
	return "  (same lines)"
}

// ControllerUsers returns the user names of the controllers' ServiceAccounts, sorted.
func ControllerUsers(reg *controllers.Registry) []string {
	var users []string
	for _, account := range accounts(reg) {
		users = append(users, serviceaccount.MakeUsername(Namespace, account))
	}
	return users
}

// accounts returns the controllers' ServiceAccounts, sorted.
func accounts(reg *controllers.Registry) []string {
	var names []string
	for _, d := range reg.Descriptors() {
		names = append(names, d.ServiceAccount())
	}
	slices.Sort(names)
	return names
}

// CachedResources returns every resource some controller caches, by group then resource,
// with the controllers that cache it.
func CachedResources(reg *controllers.Registry) map[schema.GroupResource][]string {
	cached := map[schema.GroupResource][]string{}
	for _, d := range reg.Descriptors() {
		for _, gr := range d.Caches {
			if !slices.Contains(cached[gr], d.Name) {
				cached[gr] = append(cached[gr], d.Name)
			}
		}
	}
	return cached
}

// FencedResources returns, by API group, the resources the fence policy matches: every
// resource or subresource a controller writes. The */finalizers grants are not requests
// of their own: the OwnerReferencesPermissionEnforcement plugin checks them on the create
// of the owned object, which the policy fences.
func FencedResources(reg *controllers.Registry) map[string][]string {
	fenced := map[string][]string{}
	for _, d := range reg.Descriptors() {
		for _, rule := range d.Rules {
			if !slices.ContainsFunc(rule.Verbs, IsWrite) {
				continue
			}
			for _, resource := range rule.Resources {
				if strings.HasSuffix(resource, "/finalizers") || slices.Contains(fenced[rule.Group], resource) {
					continue
				}
				fenced[rule.Group] = append(fenced[rule.Group], resource)
			}
		}
	}
	for group := range fenced {
		slices.Sort(fenced[group])
	}
	return fenced
}

// IsWrite tells the RBAC verbs that change objects, the ones the fence refuses.
func IsWrite(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// yaml helpers. The files are written as text, not marshalled, so that each rule can
// carry its reason as a comment and the layout stays the one people review.

const labels = `  labels:
    app.kubernetes.io/name: mini-kcm
    app.kubernetes.io/component: controller-manager
`

// generatedHeader starts every generated file.
const generatedHeader = "# Generated by `make generate` (hack/gen-rbac) from the controller registry\n" +
	"# (controllers/all and each controller's descriptor): edit those, not this file.\n"

// flow writes a YAML flow sequence of double-quoted strings.
func flow(values []string) string {
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = strconv.Quote(v)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// comment wraps text into comment lines at indent, about 90 columns wide.
func comment(indent, text string) string {
	if text == "" {
		return ""
	}
	var b strings.Builder
	line := indent + "#"
	for _, word := range strings.Fields(text) {
		if len(line)+1+len(word) > 90 && line != indent+"#" {
			b.WriteString(line + "\n")
			line = indent + "#"
		}
		line += " " + word
	}
	b.WriteString(line + "\n")
	return b.String()
}

// rule writes one policy rule of a rules list.
func rule(why, group string, resources, resourceNames, verbs []string) string {
	s := comment("  ", why) +
		"- apiGroups: " + flow([]string{group}) + "\n" +
		"  resources: " + flow(resources) + "\n"
	if len(resourceNames) > 0 {
		s += "  resourceNames: " + flow(resourceNames) + "\n"
	}
	return s + "  verbs: " + flow(verbs) + "\n"
}

func meta(kind, apiVersion, name, namespace string) string {
	s := "apiVersion: " + apiVersion + "\nkind: " + kind + "\nmetadata:\n  name: " + name + "\n"
	if namespace != "" {
		s += "  namespace: " + namespace + "\n"
	}
	return s + labels
}

func serviceAccountSubject(name string) string {
	return "- kind: ServiceAccount\n  name: " + name + "\n  namespace: " + Namespace + "\n"
}

func roleRef(kind, name string) string {
	return "roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: " + kind + "\n  name: " + name + "\n"
}

const rbacAPIVersion = "rbac.authorization.k8s.io/v1"

func controllerFile(d controllers.Descriptor) []byte {
	var b strings.Builder
	b.WriteString(generatedHeader)
	b.WriteString(`#
# Everything one controller needs: its ServiceAccount in kube-system, its ClusterRole and
# the binding between them. mini-kcm runs with --use-service-account-credentials and writes
# for this controller with tokens requested for this account; the shared informers read
# and events are recorded with the process's own identity (controller-manager.yaml).
# The account is named by mini-kcm, not like upstream's: every cluster's bootstrap policy
# binds system:controller:<upstream name> to upstream's accounts, which would widen ours.
`)
	b.WriteString(meta("ServiceAccount", "v1", d.ServiceAccount(), Namespace))
	b.WriteString("---\n")
	b.WriteString(meta("ClusterRole", rbacAPIVersion, ClusterRoleName(d.Name), ""))
	if len(d.Rules) == 0 {
		b.WriteString("rules: []\n")
	} else {
		b.WriteString("rules:\n")
	}
	for _, r := range d.Rules {
		b.WriteString(rule(r.Why, r.Group, r.Resources, nil, r.Verbs))
	}
	b.WriteString("---\n")
	b.WriteString(meta("ClusterRoleBinding", rbacAPIVersion, ClusterRoleName(d.Name), ""))
	b.WriteString(roleRef("ClusterRole", ClusterRoleName(d.Name)))
	b.WriteString("subjects:\n" + serviceAccountSubject(d.ServiceAccount()))
	return []byte(b.String())
}

func processRoleFile(reg *controllers.Registry) []byte {
	var b strings.Builder
	b.WriteString(generatedHeader)
	b.WriteString(`#
# The process's own identity (the StatefulSet's ServiceAccount, or the static pod's
# certificate user), beside leader-election-role.yaml and token-requests.yaml. With
# --use-service-account-credentials each controller writes as its own ServiceAccount (one
# file per controller here), so this identity only reads, for the shared informers, and
# records the controllers' events, as kube-controller-manager's own identity does.
#
# Differences from upstream's bootstrap policy, all deliberate:
#   - no "extensions" API group: extensions/v1beta1 ReplicaSets and Deployments were
#     removed in Kubernetes 1.16;
#   - no "get" where only an informer reads (informers need list and watch);
#   - events: only core/v1 "create" and "patch", the two calls client-go's recorder makes
#     (tools/record: Create for a new event, Patch to bump the count of a repeated one);
#     mini-kcm does not use the events.k8s.io API.
`)
	b.WriteString(meta("ClusterRole", rbacAPIVersion, "mini-kcm:controller-manager", ""))
	b.WriteString("rules:\n")
	cached := CachedResources(reg)
	byGroup := map[string][]string{}
	for gr := range cached {
		byGroup[gr.Group] = append(byGroup[gr.Group], gr.Resource)
	}
	groups := make([]string, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	for _, group := range groups {
		resources := byGroup[group]
		slices.Sort(resources)
		var who []string
		for _, r := range resources {
			who = append(who, r+": "+strings.Join(cached[schema.GroupResource{Group: group, Resource: r}], ", "))
		}
		why := "Cached by the shared informers for " + strings.Join(who, "; ") + "."
		b.WriteString(rule(why, group, resources, nil, []string{"list", "watch"}))
	}
	b.WriteString(rule("", "", []string{"events"}, nil, []string{"create", "patch"}))
	return []byte(b.String())
}

func tokenRequestsFile(reg *controllers.Registry) []byte {
	var b strings.Builder
	b.WriteString(generatedHeader)
	b.WriteString(`#
# --use-service-account-credentials: the process requests a token for each controller's
# ServiceAccount (POST .../serviceaccounts/<name>/token), limited to those accounts by
# name. The name is in the URL of this subresource, so, unlike the create of a Lease,
# resourceNames does apply. Never a namespace-wide grant: kube-system holds accounts far
# more powerful than any controller of mini-kcm's, and a token for one of them would be
# an escalation.
`)
	b.WriteString(meta("Role", rbacAPIVersion, "mini-kcm:token-requests", Namespace))
	b.WriteString("rules:\n")
	b.WriteString(rule("", "", []string{"serviceaccounts/token"}, accounts(reg), []string{"create"}))
	return []byte(b.String())
}

func kustomizationFile(reg *controllers.Registry) []byte {
	var b strings.Builder
	b.WriteString(generatedHeader)
	b.WriteString(`#
# The roles, and each controller's ServiceAccount bound to its role; the process's own
# identity is bound by deploy/ (the ServiceAccount) or deploy/static-pod/ (a certificate
# user). leader-election-role.yaml and serving.yaml are written by hand.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- controller-manager.yaml
- leader-election-role.yaml
- token-requests.yaml
- serving.yaml
`)
	for _, name := range reg.Names() {
		b.WriteString("- " + name + ".yaml\n")
	}
	return []byte(b.String())
}

func fencePolicyFile(reg *controllers.Registry) []byte {
	return []byte(generatedHeader + leaderelection.FencePolicy(fencedWrites(reg), labels))
}

// fencedWrites is what the fence policies judge: every write of a controller, by the
// replicas' ServiceAccount, the static pods' user or a controller's ServiceAccount.
func fencedWrites(reg *controllers.Registry) leaderelection.FencedWrites {
	users := []string{serviceaccount.MakeUsername(Namespace, ProcessServiceAccount), ProcessUser}
	return leaderelection.FencedWrites{Resources: FencedResources(reg), Users: append(users, ControllerUsers(reg)...)}
}

func fenceRBACFile(reg *controllers.Registry) []byte {
	var b strings.Builder
	b.WriteString(generatedHeader)
	b.WriteString(`#
# --leader-elect-apiserver-fence: each controller's client impersonates its own
# ServiceAccount with the user extra ` + leaderelection.LeaseHolderExtra + ` set to the replica's
# leader-election identity. Each account may impersonate itself and nothing else: one
# Role per account, limited to its own name, so that no controller can write as another
# (an impersonated request gets the impersonated user's permissions). The extra's value
# cannot be limited: it is the replica's identity, <hostname>_<uuid>, new with every
# start. A replica that sends another holder's identity on purpose gets past the policy;
# the fence guards against stale replicas, not hostile ones, which hold the controllers'
# credentials anyway. The replicas' own identity needs no grant: under
# --use-service-account-credentials it writes nothing the policy fences.
`)
	b.WriteString(selfImpersonation(reg, "mini-kcm:lease-holder-extra", []string{"userextras/" + leaderelection.LeaseHolderExtra}))
	return []byte(b.String())
}

// selfImpersonation writes the ClusterRole role, which grants impersonating the extras,
// bound to every controller's account, and each account's Role to impersonate itself.
func selfImpersonation(reg *controllers.Registry, role string, extras []string) string {
	var b strings.Builder
	b.WriteString(meta("ClusterRole", rbacAPIVersion, role, ""))
	b.WriteString("rules:\n")
	b.WriteString(rule("", "authentication.k8s.io", extras, nil, []string{"impersonate"}))
	b.WriteString("---\n")
	b.WriteString(meta("ClusterRoleBinding", rbacAPIVersion, role, ""))
	b.WriteString(roleRef("ClusterRole", role))
	b.WriteString("subjects:\n")
	for _, account := range accounts(reg) {
		b.WriteString(serviceAccountSubject(account))
	}
	for _, account := range accounts(reg) {
		name := "mini-kcm:impersonate-self:" + account
		b.WriteString("---\n")
		b.WriteString(meta("Role", rbacAPIVersion, name, Namespace))
		b.WriteString("rules:\n")
		b.WriteString(rule("", "", []string{"serviceaccounts"}, []string{account}, []string{"impersonate"}))
		b.WriteString("---\n")
		b.WriteString(meta("RoleBinding", rbacAPIVersion, name, Namespace))
		b.WriteString(roleRef("Role", name))
		b.WriteString("subjects:\n" + serviceAccountSubject(account))
	}
	return b.String()
}

func shardFencePolicyFile(reg *controllers.Registry) []byte {
	return []byte(generatedHeader + leaderelection.ShardFencePolicy(fencedWrites(reg), labels))
}

func shardFenceBindingsFile(sharded ShardedInstall) []byte {
	var b strings.Builder
	b.WriteString(generatedHeader)
	b.WriteString(comment("", fmt.Sprintf("This one also from the sharded overlay's flags (--shards=%d in %s, the Lease %s/%s): "+
		"regenerate when they change.", sharded.Shards, shardsPatchFile, sharded.LeaseNamespace, sharded.LeaseName)))
	b.WriteString(`#
# One binding of policy.yaml per shard Lease, each taking that Lease as its parameter, in
# every namespace. A replica started with --leader-elect-apiserver-fence fails unless
# every shard it is configured for has its binding here.
#
# Without the Lease (before the first replica created it, or after someone deleted it,
# until the coordinating replica recreates it) the binding admits: the apiserver looks
# the parameter up before it evaluates the match conditions, so Deny would refuse the
# pods, ReplicaSets, Deployments, Endpoints and EndpointSlices writes of every user in
# the cluster, the StatefulSet controller that creates mini-kcm's own pods included.
# Without the Lease nobody holds the shard, and its in-process fence refuses its writes.
`)
	for i := range sharded.Shards {
		if i > 0 {
			b.WriteString("---\n")
		}
		b.WriteString("apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata:\n")
		b.WriteString("  name: " + leaderelection.ShardFenceBindingName(i) + "\n" + labels)
		b.WriteString("spec:\n  policyName: " + leaderelection.ShardFencePolicyName + "\n  paramRef:\n")
		b.WriteString("    namespace: " + sharded.LeaseNamespace + "\n")
		b.WriteString("    name: " + sharded.LeaseName + "-" + strconv.Itoa(i) + "\n")
		b.WriteString("    parameterNotFoundAction: Allow\n  validationActions: [Deny]\n")
	}
	return []byte(b.String())
}

func shardFenceRBACFile(reg *controllers.Registry) []byte {
	var b strings.Builder
	b.WriteString(generatedHeader)
	b.WriteString(`#
# --leader-elect-apiserver-fence with --shards: as deploy/fence/rbac.yaml, each
# controller's ServiceAccount may impersonate itself, here with two extras, the holder
# (` + leaderelection.LeaseHolderExtra + `) and the shard Lease (` + leaderelection.ShardLeaseExtra + `). The replicas' own
# ServiceAccount may list the fence's bindings, which it checks at start (one per shard).
# The Roles that let each account impersonate itself are deploy/fence/'s, object for
# object, so that moving between the installs changes none of them.
`)
	b.WriteString(selfImpersonation(reg, "mini-kcm:shard-lease-extras",
		[]string{"userextras/" + leaderelection.ShardLeaseExtra, "userextras/" + leaderelection.LeaseHolderExtra}))
	b.WriteString("---\n")
	b.WriteString(meta("ClusterRole", rbacAPIVersion, "mini-kcm:shard-fence-bindings", ""))
	b.WriteString("rules:\n")
	b.WriteString(rule("A replica checks at start that every shard Lease has its binding of "+leaderelection.ShardFencePolicyName+
		", found by its paramRef, since its name is the installer's; RBAC cannot narrow a list by name, and "+
		"bindings hold no secrets (docs/security.md, \"Threat model\").", "admissionregistration.k8s.io",
		[]string{"validatingadmissionpolicybindings"}, nil, []string{"list"}))
	b.WriteString("---\n")
	b.WriteString(meta("ClusterRoleBinding", rbacAPIVersion, "mini-kcm:shard-fence-bindings", ""))
	b.WriteString(roleRef("ClusterRole", "mini-kcm:shard-fence-bindings"))
	b.WriteString("subjects:\n" + serviceAccountSubject(ProcessServiceAccount))
	return []byte(b.String())
}
