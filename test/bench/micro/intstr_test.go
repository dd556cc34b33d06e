package micro

import "k8s.io/apimachinery/pkg/util/intstr"

func intstrPercent(s string) intstr.IntOrString { return intstr.FromString(s) }
