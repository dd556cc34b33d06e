package subsets

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/conversion"
)

// ignoringResourceVersion is semantic deep equality (nil and empty slices are equal) that
// does not look at the resourceVersion of object references. It is never modified after
// package initialisation.
var ignoringResourceVersion = conversion.EqualitiesOrDie(
	func(a, b v1.ObjectReference) bool {
		a.ResourceVersion = ""
		b.ResourceVersion = ""
		return a == b
	},
)

// EqualIgnoringResourceVersion reports whether a and b hold the same subsets in the same
// order, ignoring the resourceVersion in targetRefs. Endpoints written before targetRef
// dropped its resourceVersion, or by another writer, would otherwise be rewritten each
// time a selected pod changes in a way that does not matter here, e.g. an annotation.
func EqualIgnoringResourceVersion(a, b []v1.EndpointSubset) bool {
	return ignoringResourceVersion.DeepEqual(a, b)
}
