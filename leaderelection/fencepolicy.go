package leaderelection

import (
	"slices"
	"strconv"
	"strings"
)

// The apiserver's half of the fence: the ValidatingAdmissionPolicies that refuse a
// write whose LeaseHolderExtra does not name the holder of the Lease it works under.
// They are written here, next to the names and extras they check, and make generate
// (hack/rbacgen) puts them into deploy/fence/ and deploy/sharded/fence/ with the
// writes of the registered controllers.

// FencedWrites is what a fence policy judges: the resources written in each API group
// ("" is the core group), and the users whose writes those are.
type FencedWrites struct {
	Resources map[string][]string
	Users     []string
}

// FencePolicy returns the ValidatingAdmissionPolicy FencePolicyName (deploy/fence/) as
// YAML, its comment first; metadataLabels is written as is under its metadata.
func FencePolicy(w FencedWrites, metadataLabels string) string {
	holder := quoteCEL(LeaseHolderExtra)
	return `#
# Refuses a write of a mini-kcm identity unless the user extra ` + LeaseHolderExtra + `
# names the current holder of the Lease (the binding's parameter). A replica running
# with --leader-elect-apiserver-fence sends its leader-election identity in that extra
# on every controller write, by impersonating its own user (rbac.yaml); a replica that
# was frozen, partitioned or suspended while a standby took over still sends the old
# identity, and its writes are refused here even if its own clock says it still leads.
#
# What it covers, and what it does not:
#   - resources: every resource a controller writes (its descriptor's rules), for every
#     write operation. The */finalizers rules are not requests of their own (the
#     OwnerReferencesPermissionEnforcement plugin checks them on a pod's or slice's
#     create). Events, Leases, TokenRequests and reviews are never fenced: they change
#     nothing a controller acts on, and a replica must renew, release and explain itself
#     whether it leads or not.
#   - identities: mini-kcm's, by user name: the replicas' ServiceAccount, the static
#     pods' certificate user, and each controller's ServiceAccount. Matching on the
#     name, not on the extra, is what refuses a replica that does not send the extra.
#   - the window: the apiserver reads the Lease from its watch cache, which lags the
#     Lease write by milliseconds (deploy/README.md, "Fencing"); the in-process fence
#     stops a replica's writes at least a second before a standby may take over.
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: ` + FencePolicyName + `
` + metadataLabels + `spec:
  # Ignore, because the apiserver resolves the parameter before it evaluates the match
  # conditions: an error there (the Lease informer not synced yet after an apiserver
  # start, a broken policy) would refuse these writes of every user, the StatefulSet
  # controller's pods of mini-kcm included, not only mini-kcm's. The validation itself
  # cannot fail at run time (every lookup is guarded), and the in-process fence stays.
  failurePolicy: Ignore
  paramKind:
    apiVersion: coordination.k8s.io/v1
    kind: Lease
  matchConstraints:
    resourceRules:
` + w.matches() + `  validations:
  - expression: >-
      ` + holder + ` in request.userInfo.extra &&
      has(params.spec.holderIdentity) &&
      request.userInfo.extra[` + holder + `] == [params.spec.holderIdentity]
    messageExpression: >-
      'write fenced by the apiserver: ' + request.userInfo.username +
      ((` + holder + ` in request.userInfo.extra) ?
      ' writes as holder ' + request.userInfo.extra[` + holder + `][0] + ' of lease ' :
      ' sends no ` + LeaseHolderExtra + ` extra (run every replica with --leader-elect-apiserver-fence) for lease ') +
      params.metadata.namespace + '/' + params.metadata.name + ', which is held by ' +
      ((has(params.spec.holderIdentity) && params.spec.holderIdentity != '') ? params.spec.holderIdentity : 'nobody')
    reason: Forbidden
`
}

// ShardFencePolicy returns the ValidatingAdmissionPolicy ShardFencePolicyName
// (deploy/sharded/fence/) as YAML, as FencePolicy does; ShardFenceBindingName names
// its bindings, one per shard Lease.
func ShardFencePolicy(w FencedWrites, metadataLabels string) string {
	holder, lease := quoteCEL(LeaseHolderExtra), quoteCEL(ShardLeaseExtra)
	return `#
# The sharded install's fence (--shards above 1 with --leader-elect-apiserver-fence): the
# policy of deploy/fence/ for many Leases. A sharded replica holds several shard Leases
# at once, and each shard term's controller clients send, by impersonating their own
# user (rbac.yaml), the holder (` + LeaseHolderExtra + `, the replica's identity) and
# the shard Lease they work under (` + ShardLeaseExtra + `, <namespace>/<name>-<shard>).
# bindings.yaml binds this policy once per shard Lease; the binding of Lease i refuses a
# write that names Lease i unless its holder is Lease i's, and lets the writes for the
# other shards pass to their own bindings. A holder that was frozen, partitioned or
# suspended while another replica took its shard over still sends the old holder, and
# its writes are refused here even if its own clock says it still holds the shard.
#
# What it covers, and what it does not:
#   - resources and identities: those of deploy/fence/policy.yaml, and a write of a
#     mini-kcm identity without the shard Lease extra is refused by every binding.
#   - the namespace: CEL cannot hash a namespace into its shard, so the policy trusts
#     the Lease a write names; that a shard's writes stay within its range is checked
#     on the replica's side (the shard filter of package sharding). The fence guards
#     against stale holders, not hostile ones, as deploy/fence/ does.
#   - a shard without a binding is not fenced here: a replica started with
#     --leader-elect-apiserver-fence checks at start that every shard Lease
#     0 … --shards-1 has one, and fails otherwise (regenerate bindings.yaml for the new
#     --shards with make generate).
#   - the window: as deploy/fence/'s, the apiserver's watch cache lag behind a Lease write.
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: ` + ShardFencePolicyName + `
` + metadataLabels + `spec:
  # Ignore, as deploy/fence/'s: the apiserver resolves the parameter before it evaluates
  # the match conditions, so an error there would refuse these writes of every user, not
  # only mini-kcm's. Every lookup below is guarded, and each shard's in-process fence stays.
  failurePolicy: Ignore
  paramKind:
    apiVersion: coordination.k8s.io/v1
    kind: Lease
  matchConstraints:
    resourceRules:
` + w.matches() + `  validations:
  - expression: >-
      ` + lease + ` in request.userInfo.extra
    messageExpression: >-
      'write fenced by the apiserver: ' + request.userInfo.username +
      ' sends no ` + ShardLeaseExtra + ` extra naming its shard Lease (run every sharded replica with --leader-elect-apiserver-fence)'
    reason: Forbidden
  - expression: >-
      !(` + lease + ` in request.userInfo.extra) ||
      request.userInfo.extra[` + lease + `] != [params.metadata.namespace + '/' + params.metadata.name] ||
      (` + holder + ` in request.userInfo.extra &&
      has(params.spec.holderIdentity) &&
      request.userInfo.extra[` + holder + `] == [params.spec.holderIdentity])
    messageExpression: >-
      'write fenced by the apiserver: ' + request.userInfo.username +
      ((` + holder + ` in request.userInfo.extra) ?
      ' writes as holder ' + request.userInfo.extra[` + holder + `][0] :
      ' sends no ` + LeaseHolderExtra + ` extra') +
      ' of shard lease ' + params.metadata.namespace + '/' + params.metadata.name + ', which is held by ' +
      ((has(params.spec.holderIdentity) && params.spec.holderIdentity != '') ? params.spec.holderIdentity : 'nobody')
    reason: Forbidden
`
}

// ShardFenceBindingName is the binding of ShardFencePolicyName to shard Lease i.
func ShardFenceBindingName(i int) string { return ShardFencePolicyName + "-" + strconv.Itoa(i) }

// matches writes the resource rules of a fence policy, the end of its
// matchConstraints, and its matchConditions on the users.
func (w FencedWrites) matches() string {
	var b strings.Builder
	groups := make([]string, 0, len(w.Resources))
	for g := range w.Resources {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	for _, group := range groups {
		b.WriteString("    - apiGroups: " + yamlFlow([]string{group}) + "\n")
		b.WriteString("      apiVersions: [\"v1\"]\n")
		b.WriteString("      resources: " + yamlFlow(w.Resources[group]) + "\n")
		b.WriteString("      operations: [\"CREATE\", \"UPDATE\", \"DELETE\"]\n")
	}
	users := make([]string, len(w.Users))
	for i, u := range w.Users {
		users[i] = quoteCEL(u)
	}
	b.WriteString(`  matchConditions:
  - name: mini-kcm-identities
    expression: >-
      request.userInfo.username in [
      ` + strings.Join(users, ",\n      ") + `]
`)
	return b.String()
}

// quoteCEL quotes s as a CEL string literal; the names quoted here hold no quote or
// backslash.
func quoteCEL(s string) string { return "'" + s + "'" }

// yamlFlow writes a YAML flow sequence of double-quoted strings.
func yamlFlow(values []string) string {
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = strconv.Quote(v)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}
