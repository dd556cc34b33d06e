package rbacgen

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/mini-kcm/mini-kcm/controllers"
)

// kubeadmControllers is the --controllers value kubeadm gives kube-controller-manager:
// every default controller plus the bootstrap-token ones, which nodes joining with a
// bootstrap token need and which "*" does not include.
const kubeadmControllers = "*,bootstrapsigner,tokencleaner"

// UpstreamControllers returns the --controllers value for the cluster's
// kube-controller-manager while mini-kcm runs: kubeadm's value with every controller
// mini-kcm runs by default turned off, or two managers would write the same objects.
func UpstreamControllers(reg *controllers.Registry) string {
	value := kubeadmControllers
	for _, d := range reg.Descriptors() {
		if !d.DisabledByDefault {
			value += ",-" + d.Name
		}
	}
	return value
}

// upstreamControllersFiles hold the value of UpstreamControllers where a user or a
// script needs it written out; make generate rewrites it in place, and Check fails when
// one of them holds another value. Paths are relative to deploy/.
var upstreamControllersFiles = []string{"kind/kind-config.yaml", "kind/demo.sh", "README.md", "base/statefulset.yaml"}

// upstreamControllersValue matches the value in those files: kubeadm's followed by the
// controllers it turns off.
var upstreamControllersValue = regexp.MustCompile(regexp.QuoteMeta(kubeadmControllers) + `(?:,-[a-z]+(?:-[a-z]+)*)+`)

// upstreamControllersStamped returns each of upstreamControllersFiles under deployDir
// with every occurrence of the value replaced by the registry's. A file without the
// value is an error: the generator would silently stop keeping it current.
func upstreamControllersStamped(reg *controllers.Registry, deployDir string) ([]File, error) {
	value := UpstreamControllers(reg)
	var files []File
	for _, rel := range upstreamControllersFiles {
		data, err := os.ReadFile(filepath.Join(deployDir, filepath.FromSlash(rel)))
		if err != nil {
			return nil, fmt.Errorf("reading the kube-controller-manager --controllers value: %w", err)
		}
		if !upstreamControllersValue.Match(data) {
			return nil, fmt.Errorf("deploy/%s no longer holds kube-controller-manager's --controllers value (%s,-…), "+
				"which make generate keeps current; remove it from the list in hack/rbacgen/upstream.go if that is meant",
				rel, kubeadmControllers)
		}
		stamped := upstreamControllersValue.ReplaceAllLiteral(data, []byte(value))
		files = append(files, File{Path: rel, Content: stamped})
	}
	return files, nil
}
