package controllers

import (
	"fmt"
	"slices"
)

// PodField names a field of a pod that a controller reads from the shared informers'
// cache, by its JSON path from the pod: "spec.nodeName". A path through a list names the
// field in every item: "spec.containers.ports" is the ports of every container.
//
// The shared informers keep of every pod its metadata, but for its managedFields and
// its annotations, and beyond that only the fields and annotations that some registered
// controller declares in its Descriptor (caches/cachetrim). A controller that reads a pod
// field it does not declare finds it empty.
type PodField string

// The pod fields controllers may declare. A new one needs only its constant here and in
// PodFields; caches/cachetrim finds its protobuf field numbers from the API types.
const (
	PodNodeName  PodField = "spec.nodeName"
	PodHostname  PodField = "spec.hostname"
	PodSubdomain PodField = "spec.subdomain"

	PodContainerNames               PodField = "spec.containers.name"
	PodContainerPorts               PodField = "spec.containers.ports"
	PodInitContainerNames           PodField = "spec.initContainers.name"
	PodInitContainerPorts           PodField = "spec.initContainers.ports"
	PodInitContainerRestartPolicies PodField = "spec.initContainers.restartPolicy"

	PodPhase PodField = "status.phase"
	// PodReadyCondition is the type, status and lastTransitionTime of the pod's first
	// Ready condition; its other conditions are dropped.
	PodReadyCondition PodField = "status.conditions[type=Ready]"
	PodIP             PodField = "status.podIP"
	PodIPs            PodField = "status.podIPs"

	PodContainerStatusNames         PodField = "status.containerStatuses.name"
	PodContainerStatusReady         PodField = "status.containerStatuses.ready"
	PodContainerStatusRestartCounts PodField = "status.containerStatuses.restartCount"
	PodInitContainerStatusNames     PodField = "status.initContainerStatuses.name"
	PodInitContainerStatusReady     PodField = "status.initContainerStatuses.ready"
	// PodInitContainerStatusRestartCounts is the restart count of every init container.
	PodInitContainerStatusRestartCounts PodField = "status.initContainerStatuses.restartCount"
)

// PodFields returns every PodField a controller may declare.
func PodFields() []PodField {
	return []PodField{
		PodNodeName, PodHostname, PodSubdomain,
		PodContainerNames, PodContainerPorts, PodInitContainerNames, PodInitContainerPorts, PodInitContainerRestartPolicies,
		PodPhase, PodReadyCondition, PodIP, PodIPs,
		PodContainerStatusNames, PodContainerStatusReady, PodContainerStatusRestartCounts,
		PodInitContainerStatusNames, PodInitContainerStatusReady, PodInitContainerStatusRestartCounts,
	}
}

// PodReads is what controllers read of the cached pods beyond their metadata.
type PodReads struct {
	// Fields are the pod fields read, sorted and without duplicates.
	Fields []PodField
	// Annotations are the annotation keys read, sorted and without duplicates.
	Annotations []string
}

// validatePodReads rejects a field outside the vocabulary and an empty annotation key.
func validatePodReads(fields []PodField, annotations []string) error {
	known := PodFields()
	for _, f := range fields {
		if !slices.Contains(known, f) {
			return fmt.Errorf("pod field %q is not one of controllers.PodFields()", f)
		}
	}
	if slices.Contains(annotations, "") {
		return fmt.Errorf("an empty pod annotation key")
	}
	return nil
}

// PodReads returns the union of what the registered controllers read of pods: what the
// shared informers keep of every pod beyond its metadata.
func (r *Registry) PodReads() PodReads {
	var reads PodReads
	for _, d := range r.descriptors {
		reads.Fields = append(reads.Fields, d.PodFields...)
		reads.Annotations = append(reads.Annotations, d.PodAnnotations...)
	}
	slices.Sort(reads.Fields)
	slices.Sort(reads.Annotations)
	reads.Fields = slices.Compact(reads.Fields)
	reads.Annotations = slices.Compact(reads.Annotations)
	return reads
}
