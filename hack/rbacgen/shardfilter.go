package rbacgen

import (
	"bytes"
	"fmt"
	"go/format"
	"maps"
	"reflect"
	"slices"
	"strings"
	"text/template"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/mini-kcm/mini-kcm/controllers"
)

// ShardFilterFile is where ShardFilterSource is written, relative to the repository root.
const ShardFilterFile = "sharding/zz_generated_filter.go"

// The shard filter (sharding/filter.go) drops, below a shard's informers, every object
// outside the shard's range. It has to sit where the informers list and watch, on
// client-go's typed clients: a method per resource, with the resource's own list type,
// which Go cannot write once for all of them. So the typed part is generated here from
// the resources the registry's controllers cache, and a controller that caches a new
// namespaced resource gets its filter from `make generate`.

// filteredResource is one namespaced resource of the generated filter, as client-go's
// clientset names it.
type filteredResource struct {
	GroupResource schema.GroupResource
	// Method is the group client's method that returns the resource's client (Pods),
	// Interface that client's interface (PodInterface), List its list type (PodList).
	Method, Interface, List string
}

// filteredGroup is one group version of the clientset with the filtered resources in it.
type filteredGroup struct {
	// Method is the clientset's method (CoreV1), Interface what it returns
	// (CoreV1Interface); APIAlias and ClientAlias name the imports of the API types and
	// of the typed client.
	Method, Interface       string
	APIPath, APIAlias       string
	ClientPath, ClientAlias string
	Resources               []filteredResource
}

// ShardFilterSource returns the generated part of the shard filter for every namespaced
// resource the registry's controllers cache: the typed wrappers of filteredClient, whose
// List and Watch drop what the range does not hold, and the list filteredResources. A
// cluster-scoped resource is left out: no shard owns it (sharding/informers.go routes it
// to the replica's unfiltered factory).
func ShardFilterSource(reg *controllers.Registry) ([]byte, error) {
	groups := map[string]*filteredGroup{}
	for _, gr := range slices.SortedFunc(maps.Keys(CachedResources(reg)), func(a, b schema.GroupResource) int {
		return strings.Compare(a.String(), b.String())
	}) {
		g, r, namespaced, err := typedClientOf(gr)
		if err != nil {
			return nil, err
		}
		if !namespaced {
			continue
		}
		if groups[g.Method] == nil {
			groups[g.Method] = &g
		}
		groups[g.Method].Resources = append(groups[g.Method].Resources, r)
	}
	var data struct {
		Groups    []*filteredGroup
		Resources []filteredResource
	}
	for _, method := range slices.Sorted(maps.Keys(groups)) {
		data.Groups = append(data.Groups, groups[method])
		data.Resources = append(data.Resources, groups[method].Resources...)
	}
	var out bytes.Buffer
	if err := shardFilterTemplate.Execute(&out, data); err != nil {
		return nil, err
	}
	src, err := format.Source(out.Bytes())
	if err != nil {
		return nil, fmt.Errorf("formatting the generated shard filter: %w\n%s", err, out.Bytes())
	}
	return src, nil
}

// typedClientOf finds gr's typed client in client-go's clientset: the kind the scheme
// knows for it in its group's preferred version, that kind's API package, the clientset
// method of the typed client package beside it, and the group client's method whose
// client lists that kind. A resource client-go does not know is an error: a controller
// caching it would need a client of its own, not the clientset's informers.
func typedClientOf(gr schema.GroupResource) (g filteredGroup, r filteredResource, namespaced bool, err error) {
	versions := scheme.Scheme.PrioritizedVersionsForGroup(gr.Group)
	if len(versions) == 0 {
		return g, r, false, fmt.Errorf("a controller caches %s, whose group client-go's scheme does not know", gr)
	}
	gv := versions[0]
	var kind string
	for gvk := range scheme.Scheme.AllKnownTypes() {
		if gvk.GroupVersion() != gv || strings.HasSuffix(gvk.Kind, "List") {
			continue
		}
		if plural, _ := apimeta.UnsafeGuessKindToResource(gvk); plural.Resource == gr.Resource {
			kind = gvk.Kind
		}
	}
	if kind == "" {
		return g, r, false, fmt.Errorf("a controller caches %s, which client-go's scheme does not know in %s", gr, gv)
	}
	listType := scheme.Scheme.AllKnownTypes()[gv.WithKind(kind+"List")]
	if listType == nil {
		return g, r, false, fmt.Errorf("a controller caches %s (%s), whose list kind %sList client-go's scheme does not know in %s", gr, kind, kind, gv)
	}
	apiPath := listType.PkgPath()                                                                  // k8s.io/api/core/v1
	clientPath := strings.Replace(apiPath, "k8s.io/api/", "k8s.io/client-go/kubernetes/typed/", 1) // …/typed/core/v1
	apiAlias := strings.ReplaceAll(strings.TrimPrefix(apiPath, "k8s.io/api/"), "/", "")            // corev1

	clientset := reflect.TypeFor[kubernetes.Interface]()
	for i := range clientset.NumMethod() {
		m := clientset.Method(i)
		if m.Type.NumIn() != 0 || m.Type.NumOut() != 1 || m.Type.Out(0).PkgPath() != clientPath {
			continue
		}
		group := m.Type.Out(0)
		g = filteredGroup{
			Method: m.Name, Interface: group.Name(),
			APIPath: apiPath, APIAlias: apiAlias,
			ClientPath: clientPath, ClientAlias: apiAlias + "client",
		}
		for j := range group.NumMethod() {
			rm := group.Method(j)
			if rm.Type.NumOut() != 1 || rm.Type.Out(0).Kind() != reflect.Interface {
				continue
			}
			list, ok := rm.Type.Out(0).MethodByName("List")
			if !ok || list.Type.NumOut() != 2 || list.Type.Out(0) != reflect.PointerTo(listType) {
				continue
			}
			r = filteredResource{GroupResource: gr, Method: rm.Name, Interface: rm.Type.Out(0).Name(), List: listType.Name()}
			namespaced = rm.Type.NumIn() == 1 && rm.Type.In(0).Kind() == reflect.String
			return g, r, namespaced, nil
		}
	}
	return g, r, false, fmt.Errorf("a controller caches %s (%s), for which client-go's clientset has no typed client in %s", gr, kind, clientPath)
}

var shardFilterTemplate = template.Must(template.New("filter").Parse(`// Code generated by make generate (hack/rbacgen) from the resources the registry's controllers cache. DO NOT EDIT.

package sharding

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
{{- range .Groups}}
	{{.APIAlias}} "{{.APIPath}}"
	{{.ClientAlias}} "{{.ClientPath}}"
{{- end}}
)

// filteredResources are the namespaced resources whose lists and watches filteredClient
// filters: every one a registered controller caches.
var filteredResources = []schema.GroupResource{
{{- range .Resources}}
	{Group: "{{.GroupResource.Group}}", Resource: "{{.GroupResource.Resource}}"},
{{- end}}
}
{{range $g := .Groups}}
func (c filteredClient) {{.Method}}() {{.ClientAlias}}.{{.Interface}} {
	return filtered{{.Method}}{ {{- .Interface}}: c.Interface.{{.Method}}(), f: c.f}
}

type filtered{{.Method}} struct {
	{{.ClientAlias}}.{{.Interface}}
	f rangeFilter
}
{{range .Resources}}
func (c filtered{{$g.Method}}) {{.Method}}(namespace string) {{$g.ClientAlias}}.{{.Interface}} {
	return filtered{{$g.Method}}{{.Method}}{ {{- .Interface}}: c.{{$g.Interface}}.{{.Method}}(namespace), f: c.f}
}

type filtered{{$g.Method}}{{.Method}} struct {
	{{$g.ClientAlias}}.{{.Interface}}
	f rangeFilter
}

func (c filtered{{$g.Method}}{{.Method}}) List(ctx context.Context, opts metav1.ListOptions) (*{{$g.APIAlias}}.{{.List}}, error) {
	l, err := c.{{.Interface}}.List(ctx, opts)
	if l != nil {
		l.Items = keep(c.f, l.Items)
	}
	return l, err
}

func (c filtered{{$g.Method}}{{.Method}}) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return c.f.watch(c.{{.Interface}}.Watch(ctx, opts))
}
{{end}}{{end}}`))
