package rbacgen

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/component-base/featuregate"

	"github.com/mini-kcm/mini-kcm/caches/cachetrim"
	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/controllers/all"
	"github.com/mini-kcm/mini-kcm/options"
)

// What the throwaway controller's package would hold besides its descriptor: a
// controller, its options, its gate and the pod annotation it reads.
type throwawayController struct{}

func (throwawayController) Run(context.Context, int) {}

type throwawayOptions struct{ Workers int }

func (o *throwawayOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.Workers, "concurrent-podlabeler-syncs", o.Workers, "The number of pods labeled at once.")
}
func (o *throwawayOptions) Validate() []error { return nil }

var throwawayGate = controllers.FeatureGate{Name: "PodLabeler", Specs: featuregate.VersionedSpecs{
	{Version: version.MustParse("1.37"), Default: false, PreRelease: featuregate.Alpha},
}}

const throwawayAnnotation = "example.com/pod-ordinal"

// Besides its RBAC and fence (see above), everything else a new controller needs
// follows from its package and its registry entry: kube-controller-manager's
// --controllers value in deploy/ turns it off, --help has its section, its name and its
// gate, the gate decides whether it runs, and the cache keeps what it reads of pods.
func TestAThrowawayControllerNeedsNothingButItsPackageAndARegistryEntry(t *testing.T) {
	reg := controllers.MustNewRegistry(append(all.Descriptors(), throwaway())...)

	stamped, err := upstreamControllersStamped(reg, filepath.Join("..", "..", "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range stamped {
		if !strings.Contains(string(f.Content), ",-podlabeler-controller") {
			t.Errorf("make generate leaves deploy/%s without -podlabeler-controller in kube-controller-manager's --controllers", f.Path)
		}
	}

	o := options.NewOptions()
	fss := o.Flags(reg)
	if fss.FlagSets["podlabeler-controller"] == nil || fss.FlagSets["podlabeler-controller"].Lookup("concurrent-podlabeler-syncs") == nil {
		t.Errorf("--help has no podlabeler-controller section with its flag")
	}
	generic := fss.FlagSets["generic"]
	if usage := generic.Lookup("controllers").Usage; !strings.Contains(usage, "podlabeler-controller") {
		t.Errorf("--controllers help does not name the controller:\n%s", usage)
	}
	if usage := generic.Lookup("feature-gates").Usage; !strings.Contains(usage, "PodLabeler=true|false (ALPHA - default=false)") {
		t.Errorf("--feature-gates help does not offer its gate:\n%s", usage)
	}

	d, _ := reg.Get("podlabeler-controller")
	for _, tc := range []struct {
		args    []string
		wantRun bool
	}{{nil, false}, {[]string{"--feature-gates=PodLabeler=true"}, true}} {
		o := options.NewOptions()
		fs := pflag.NewFlagSet("mini-kcm", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		for _, set := range o.Flags(reg).FlagSets {
			fs.AddFlagSet(set)
		}
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		var cfg controllers.Config
		o.FeatureGates.ApplyTo(&cfg, reg)
		c, _, err := d.Build(context.Background(), controllers.Context{Config: cfg})
		if err != nil || (c != nil) != tc.wantRun {
			t.Errorf("with %q: Build = %v, %v; want it built: %v", tc.args, c, err, tc.wantRun)
		}
	}

	trimmer, err := cachetrim.NewTrimmer(reg.PodReads())
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{throwawayAnnotation: "2", "other": "x"}}}
	trimmer.Trim(pod)
	if len(pod.Annotations) != 1 || pod.Annotations[throwawayAnnotation] != "2" {
		t.Errorf("the cached pod's annotations are %v, want only the one the controller declares", pod.Annotations)
	}
}

// The throwaway controller caches StatefulSets, which no other controller does: make
// generate gives the shard filter a typed wrapper for them, and the sharding package
// compiles with it (go build with the generated file in an overlay), so that a shard's
// informers drop the StatefulSets of other shards behind an apiserver that ignores
// shardSelector.
func TestAThrowawayControllersCachedResourceIsShardFiltered(t *testing.T) {
	reg := controllers.MustNewRegistry(append(all.Descriptors(), throwaway())...)
	src, err := ShardFilterSource(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`{Group: "apps", Resource: "statefulsets"}`,
		"func (c filteredAppsV1) StatefulSets(namespace string) appsv1client.StatefulSetInterface",
		"func (c filteredAppsV1StatefulSets) List(ctx context.Context, opts metav1.ListOptions) (*appsv1.StatefulSetList, error)",
		"func (c filteredAppsV1StatefulSets) Watch(",
	} {
		if !strings.Contains(string(src), want) {
			t.Errorf("the generated shard filter lacks %s:\n%s", want, src)
		}
	}

	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	generated := filepath.Join(dir, "zz_generated_filter.go")
	if err := os.WriteFile(generated, src, 0o644); err != nil {
		t.Fatal(err)
	}
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(root, filepath.FromSlash(ShardFilterFile)): generated}})
	if err != nil {
		t.Fatal(err)
	}
	overlayFile := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlayFile, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	// Static and -trimpath, as make lint vets: the sharding package's dependencies are
	// then in the build cache already, and only the package itself compiles.
	build := exec.Command("go", "build", "-overlay", overlayFile, "-o", os.DevNull, "./sharding")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-trimpath")
	if out, err := build.CombinedOutput(); err != nil {
		t.Errorf("the sharding package does not compile with the generated shard filter: %v\n%s", err, out)
	}
}
