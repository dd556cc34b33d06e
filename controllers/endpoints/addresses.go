package endpoints

import (
	"fmt"
	"net"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	endpointsliceutil "k8s.io/endpointslice/util"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/controllers/endpoints/subsets"
	"github.com/mini-kcm/mini-kcm/controllers/podstate"
)

// subsetsFor returns the repacked subsets of service's Endpoints for the pods its selector
// matches, and how many ready and not-ready (address, port) pairs went into them.
func subsetsFor(logger klog.Logger, service *v1.Service, pods []*v1.Pod) (result []v1.EndpointSubset, ready, notReady int) {
	publishNotReady := service.Spec.PublishNotReadyAddresses
	var expanded []v1.EndpointSubset
	add := func(pod *v1.Pod, addr v1.EndpointAddress, port *v1.EndpointPort) {
		subset := v1.EndpointSubset{Ports: []v1.EndpointPort{}}
		if port != nil {
			subset.Ports = append(subset.Ports, *port)
		}
		if publishNotReady || podstate.IsReady(pod) {
			subset.Addresses = []v1.EndpointAddress{addr}
			ready++
		} else {
			subset.NotReadyAddresses = []v1.EndpointAddress{addr}
			notReady++
		}
		expanded = append(expanded, subset)
	}

	for _, pod := range pods {
		if !endpointsliceutil.ShouldPodBeInEndpoints(pod, publishNotReady) {
			logger.V(5).Info("Pod is not included in the Endpoints of the Service", "pod", klog.KObj(pod), "service", klog.KObj(service))
			continue
		}
		addr, err := addressFor(service, pod)
		if err != nil {
			// This happens while a cluster moves to dual stack and some nodes give
			// their pods only one family.
			logger.V(2).Info("Pod has no IP of the Service's family", "pod", klog.KObj(pod), "service", klog.KObj(service), "clusterIP", service.Spec.ClusterIP, "err", err)
			continue
		}
		if endpointsliceutil.ShouldSetHostname(pod, service) {
			addr.Hostname = pod.Spec.Hostname
		}

		if len(service.Spec.Ports) == 0 {
			// A headless Service may have no ports; its clients resolve the pods by DNS.
			// Any other Service without ports gets no addresses.
			if service.Spec.ClusterIP == v1.ClusterIPNone {
				add(pod, *addr, nil)
			}
			continue
		}
		for i := range service.Spec.Ports {
			servicePort := &service.Spec.Ports[i]
			portNum, err := findPort(pod, servicePort)
			if err != nil {
				logger.V(4).Info("Pod has no port for the Service port", "pod", klog.KObj(pod), "service", klog.KObj(service), "port", servicePort.Name, "err", err)
				continue
			}
			add(pod, *addr, endpointPortFor(servicePort, portNum))
		}
	}
	return subsets.Repack(expanded), ready, notReady
}

// findPort returns the pod port a Service port targets. A numeric targetPort is used as
// is; a named one must match a container port by name and protocol, in the regular
// containers first and then in the restartable init containers (sidecars).
func findPort(pod *v1.Pod, servicePort *v1.ServicePort) (int, error) {
	target := servicePort.TargetPort
	switch target.Type {
	case intstr.Int:
		return target.IntValue(), nil
	case intstr.String:
		for _, container := range pod.Spec.Containers {
			if port, ok := namedPort(container, target.StrVal, servicePort.Protocol); ok {
				return port, nil
			}
		}
		for _, container := range pod.Spec.InitContainers {
			if container.RestartPolicy == nil || *container.RestartPolicy != v1.ContainerRestartPolicyAlways {
				continue
			}
			if port, ok := namedPort(container, target.StrVal, servicePort.Protocol); ok {
				return port, nil
			}
		}
	}
	return 0, fmt.Errorf("no container port named %q with protocol %s in pod %s/%s", target.StrVal, servicePort.Protocol, pod.Namespace, pod.Name)
}

func namedPort(container v1.Container, name string, protocol v1.Protocol) (int, bool) {
	for _, port := range container.Ports {
		if port.Name == name && port.Protocol == protocol {
			return int(port.ContainerPort), true
		}
	}
	return 0, false
}

func endpointPortFor(servicePort *v1.ServicePort, portNum int) *v1.EndpointPort {
	return &v1.EndpointPort{
		Name:        servicePort.Name,
		Port:        int32(portNum),
		Protocol:    servicePort.Protocol,
		AppProtocol: servicePort.AppProtocol,
	}
}

// addressFor returns pod's address for service: its first IP of the Service's primary IP
// family, the node it runs on (always set, even to ""), and a reference to the pod without
// resourceVersion so that pod updates which change nothing here do not rewrite Endpoints.
func addressFor(service *v1.Service, pod *v1.Pod) (*v1.EndpointAddress, error) {
	wantIPv6 := serviceIPFamily(service, pod) == v1.IPv6Protocol
	var ip string
	for _, podIP := range pod.Status.PodIPs {
		// The IP is re-formatted in case the pod holds it in an irregular form.
		parsed := parseIPSloppy(podIP.IP)
		if parsed != nil && wantIPv6 == (parsed.To4() == nil) {
			ip = parsed.String()
			break
		}
	}
	if ip == "" {
		return nil, fmt.Errorf("pod %s/%s has no IP of the %s family of service %s", pod.Namespace, pod.Name, familyName(wantIPv6), service.Name)
	}
	nodeName := pod.Spec.NodeName
	return &v1.EndpointAddress{
		IP:       ip,
		NodeName: &nodeName,
		TargetRef: &v1.ObjectReference{
			Kind:      "Pod",
			Namespace: pod.Namespace,
			Name:      pod.Name,
			UID:       pod.UID,
		},
	}, nil
}

// serviceIPFamily returns the Service's primary IP family. The apiserver always sets
// ipFamilies, but a Service may still arrive without them (from an older apiserver, or a
// test), so the family is then inferred from the cluster IP or, for a headless Service,
// from the pod's own IP.
func serviceIPFamily(service *v1.Service, pod *v1.Pod) v1.IPFamily {
	switch {
	case len(service.Spec.IPFamilies) > 0:
		return service.Spec.IPFamilies[0]
	case service.Spec.ClusterIP != "" && service.Spec.ClusterIP != v1.ClusterIPNone:
		if isIPv6(service.Spec.ClusterIP) {
			return v1.IPv6Protocol
		}
	case isIPv6(pod.Status.PodIP):
		return v1.IPv6Protocol
	}
	return v1.IPv4Protocol
}

func familyName(ipv6 bool) string {
	if ipv6 {
		return string(v1.IPv6Protocol)
	}
	return string(v1.IPv4Protocol)
}

func isIPv6(s string) bool {
	ip := parseIPSloppy(s)
	return ip != nil && ip.To4() == nil
}

// parseIPSloppy parses an IP like net.ParseIP but also accepts IPv4 octets with leading
// zeros, read as decimal. Go rejects them since 1.17, but the apiserver accepted them
// before, so old objects may hold them (kubernetes#100895).
func parseIPSloppy(s string) net.IP {
	if ip := net.ParseIP(s); ip != nil {
		return ip
	}
	prefix, ipv4 := "", s
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		prefix, ipv4 = s[:i+1], s[i+1:]
	}
	octets := strings.Split(ipv4, ".")
	if len(octets) != 4 {
		return nil
	}
	for i, octet := range octets {
		if octet == "" || strings.Trim(octet, "0123456789") != "" {
			return nil
		}
		if octet = strings.TrimLeft(octet, "0"); octet == "" {
			octet = "0"
		}
		octets[i] = octet
	}
	return net.ParseIP(prefix + strings.Join(octets, "."))
}
