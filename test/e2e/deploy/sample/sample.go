// Package sample drives the sample app of deploy/sample/ (a Namespace, a Deployment and
// a Service that only mini-kcm's controllers can roll out) and checks, from the API
// alone, that it is rolled out: the Deployment's status, its pods and the Service's
// Endpoints. The e2e suite and the failover demo share it.
package sample

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/mini-kcm/mini-kcm/test/e2e/deploy/install"
)

// App is the sample app as its manifests describe it.
type App struct {
	// Manifests are the objects of the kustomization, the Namespace first.
	Manifests []install.Manifest
	// Deployment and Service are the typed views of the two workload objects.
	Deployment *appsv1.Deployment
	Service    *corev1.Service
}

// Load reads the kustomization in dir.
func Load(dir string) (*App, error) {
	manifests, err := install.LoadKustomization(dir)
	if err != nil {
		return nil, err
	}
	app := &App{Manifests: manifests}
	for _, m := range manifests {
		var into any
		switch m.Object.GetKind() {
		case "Deployment":
			app.Deployment = &appsv1.Deployment{}
			into = app.Deployment
		case "Service":
			app.Service = &corev1.Service{}
			into = app.Service
		default:
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m.Object.Object, into); err != nil {
			return nil, fmt.Errorf("%s: %w", m, err)
		}
	}
	switch {
	case len(manifests) == 0 || manifests[0].Object.GetKind() != "Namespace":
		return nil, fmt.Errorf("%s: the kustomization must list its Namespace first", dir)
	case app.Deployment == nil || app.Service == nil:
		return nil, fmt.Errorf("%s: want a Deployment and a Service", dir)
	}
	return app, nil
}

// Namespace is where the app lives.
func (a *App) Namespace() string { return a.Deployment.Namespace }

// Apply applies the app with server-side apply, forcing spec.replicas back to the
// manifest's value if it was scaled.
func (a *App) Apply(ctx context.Context, applier *install.Applier) error {
	_, err := applier.Apply(ctx, a.Manifests, install.ApplyOptions{})
	return err
}

// Scale sets the Deployment's replicas through the scale subresource, as
// `kubectl scale` does.
func (a *App) Scale(ctx context.Context, client kubernetes.Interface, replicas int32) error {
	deployments := client.AppsV1().Deployments(a.Namespace())
	scale, err := deployments.GetScale(ctx, a.Deployment.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading the scale of deployment %s/%s: %w", a.Namespace(), a.Deployment.Name, err)
	}
	scale.Spec.Replicas = replicas
	if _, err := deployments.UpdateScale(ctx, a.Deployment.Name, scale, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("scaling deployment %s/%s to %d: %w", a.Namespace(), a.Deployment.Name, replicas, err)
	}
	return nil
}

// State is what the API says about the app at one moment.
type State struct {
	// Deployment is the Deployment as read.
	Deployment *appsv1.Deployment
	// ReadyPods counts the pods of the Deployment's selector that are ready, not
	// being deleted, and controlled by a ReplicaSet; Pods counts all of them.
	ReadyPods, Pods int
	// Addresses are the ready addresses of the Service's Endpoints, with the port the
	// Service's targetPort resolved to; nil if there are no Endpoints yet.
	Addresses []string
}

// String summarises the state on one line.
func (s State) String() string {
	d := s.Deployment
	return fmt.Sprintf("deployment %d/%d available (updated %d, generation %d observed %d), pods %d ready of %d, endpoints [%s]",
		d.Status.AvailableReplicas, replicas(d), d.Status.UpdatedReplicas, d.Generation, d.Status.ObservedGeneration,
		s.ReadyPods, s.Pods, strings.Join(s.Addresses, " "))
}

// Read reads the app's state.
func (a *App) Read(ctx context.Context, client kubernetes.Interface) (State, error) {
	ns := a.Namespace()
	d, err := client.AppsV1().Deployments(ns).Get(ctx, a.Deployment.Name, metav1.GetOptions{})
	if err != nil {
		return State{}, err
	}
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return State{}, fmt.Errorf("deployment %s/%s: %w", ns, d.Name, err)
	}
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return State{}, err
	}
	state := State{Deployment: d, Pods: len(pods.Items)}
	for i := range pods.Items {
		p := &pods.Items[i]
		if ref := metav1.GetControllerOf(p); p.DeletionTimestamp == nil && podReady(p) && ref != nil && ref.Kind == "ReplicaSet" {
			state.ReadyPods++
		}
	}
	ep, err := client.CoreV1().Endpoints(ns).Get(ctx, a.Service.Name, metav1.GetOptions{})
	if err != nil {
		return state, nil
	}
	for _, subset := range ep.Subsets {
		for _, port := range subset.Ports {
			for _, address := range subset.Addresses {
				state.Addresses = append(state.Addresses, fmt.Sprintf("%s:%d", address.IP, port.Port))
			}
		}
	}
	slices.Sort(state.Addresses)
	return state, nil
}

// RolledOut returns nil once the Deployment's current template runs as exactly want
// ready pods, its status says so with the Available condition, and the Service's
// Endpoints list exactly those pods; otherwise an error saying what is missing.
func (a *App) RolledOut(ctx context.Context, client kubernetes.Interface, want int32) (State, error) {
	s, err := a.Read(ctx, client)
	if err != nil {
		return s, err
	}
	d := s.Deployment
	var problems []string
	if replicas(d) != want {
		problems = append(problems, fmt.Sprintf("spec.replicas is %d", replicas(d)))
	}
	if st := d.Status; st.ObservedGeneration < d.Generation || st.UpdatedReplicas != want || st.Replicas != want || st.AvailableReplicas != want {
		problems = append(problems, "status "+compact(st))
	}
	if !slices.ContainsFunc(d.Status.Conditions, func(c appsv1.DeploymentCondition) bool {
		return c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue
	}) {
		problems = append(problems, "not Available")
	}
	if s.ReadyPods != int(want) || s.Pods != int(want) {
		problems = append(problems, fmt.Sprintf("%d pods of which %d ready", s.Pods, s.ReadyPods))
	}
	if len(s.Addresses) != int(want) {
		problems = append(problems, fmt.Sprintf("%d ready endpoint addresses", len(s.Addresses)))
	}
	if len(problems) > 0 {
		return s, fmt.Errorf("deployment %s/%s not rolled out to %d: %s", a.Namespace(), d.Name, want, strings.Join(problems, "; "))
	}
	return s, nil
}

// WaitRolledOut polls RolledOut until it succeeds or timeout passes.
func (a *App) WaitRolledOut(ctx context.Context, client kubernetes.Interface, want int32, timeout time.Duration) (State, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		s, err := a.RolledOut(ctx, client, want)
		if err == nil {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return s, fmt.Errorf("after %v: %w", timeout, errors.Join(err, ctx.Err()))
		case <-ticker.C:
		}
	}
}

// Delete deletes the app and everything its controllers made. No namespace controller
// or garbage collector runs on the local control plane, so the namespace's contents
// are deleted kind by kind before the namespace itself, which then stays Terminating
// for the rest of the suite: only the suite's last user of the app may call Delete;
// the others call DeleteObjects.
func (a *App) Delete(ctx context.Context, client kubernetes.Interface) error {
	errs := []error{a.DeleteObjects(ctx, client)}
	if err := client.CoreV1().Namespaces().Delete(ctx, a.Namespace(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// DeleteObjects deletes the app and everything its controllers made, and keeps the
// namespace, so that a later test of the suite can apply the app again.
func (a *App) DeleteObjects(ctx context.Context, client kubernetes.Interface) error {
	ns := a.Namespace()
	del, all := metav1.DeleteOptions{}, metav1.ListOptions{}
	var errs []error
	for _, err := range []error{
		client.AppsV1().Deployments(ns).DeleteCollection(ctx, del, all),
		client.AppsV1().ReplicaSets(ns).DeleteCollection(ctx, del, all),
		client.CoreV1().Pods(ns).DeleteCollection(ctx, del, all),
		client.CoreV1().Services(ns).Delete(ctx, a.Service.Name, del),
		client.CoreV1().Endpoints(ns).DeleteCollection(ctx, del, all),
		client.DiscoveryV1().EndpointSlices(ns).DeleteCollection(ctx, del, all),
		client.CoreV1().Events(ns).DeleteCollection(ctx, del, all),
	} {
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func replicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

func podReady(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
}

// compact renders a status on one line for messages.
func compact(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(data)
}
