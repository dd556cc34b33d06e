package cachetrim

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	v1 "k8s.io/api/core/v1"

	"github.com/mini-kcm/mini-kcm/controllers"
)

// A Trimmer's plan of a pod is built once from the declared fields: each names a JSON
// path, whose protobuf field numbers come from the API types' protobuf tags, so that
// the table the filter walks at every decoding holds only numbers.

// keepNode is, while a Trimmer is built, what to keep of one field of a pod: the field
// whole, or some of its fields.
type keepNode struct {
	whole bool
	// readyOnly keeps only the first item whose type is Ready (a pod's conditions).
	readyOnly bool
	children  map[protowire.Number]*keepNode
}

// readyCondition is what controllers.PodReadyCondition keeps: of the pod's conditions,
// the first Ready one, and of it these fields.
var readyCondition = struct {
	path   string
	fields []string
}{"status.conditions", []string{"type", "status", "lastTransitionTime"}}

// add adds the declared field f to the tree.
func (n *keepNode) add(f controllers.PodField) error {
	path, fields := string(f), []string(nil)
	if f == controllers.PodReadyCondition {
		path, fields = readyCondition.path, readyCondition.fields
	}
	nums, typ, err := protobufPath(reflect.TypeFor[v1.Pod](), path)
	if err != nil {
		return fmt.Errorf("pod field %q: %w", f, err)
	}
	leaf := n
	for _, num := range nums {
		leaf = leaf.child(num)
	}
	if fields == nil {
		leaf.whole = true
		return nil
	}
	leaf.readyOnly = true
	for _, name := range fields {
		sub, _, err := protobufPath(typ, name)
		if err != nil {
			return fmt.Errorf("pod field %q: %w", f, err)
		}
		leaf.child(sub[0]).whole = true
	}
	return nil
}

func (n *keepNode) child(num protowire.Number) *keepNode {
	if n.children == nil {
		n.children = map[protowire.Number]*keepNode{}
	}
	c, ok := n.children[num]
	if !ok {
		c = &keepNode{}
		n.children[num] = c
	}
	return c
}

// plan turns the tree under n into the table its filter walks.
func (n *keepNode) plan() messagePlan {
	var plan messagePlan
	for num, c := range n.children {
		for len(plan) <= int(num) {
			plan = append(plan, fieldPlan{})
		}
		p := fieldPlan{keep: true, readyOnly: c.readyOnly}
		if !c.whole {
			p.filter = c.plan().appendKept
		}
		plan[num] = p
	}
	return plan
}

// protobufPath returns the protobuf field numbers of the fields along the JSON path
// (names separated by dots) from typ, read from the generated types' protobuf tags, and
// the type of the last field, less its pointers and slices.
func protobufPath(typ reflect.Type, path string) ([]protowire.Number, reflect.Type, error) {
	var nums []protowire.Number
	for name := range strings.SplitSeq(path, ".") {
		field, ok := fieldByJSONName(typ, name)
		if !ok {
			return nil, nil, fmt.Errorf("%s has no field %q", typ, name)
		}
		tag := strings.Split(field.Tag.Get("protobuf"), ",")
		if len(tag) < 2 {
			return nil, nil, fmt.Errorf("%s.%s has no protobuf field number", typ, field.Name)
		}
		num, err := strconv.Atoi(tag[1])
		if err != nil || !protowire.Number(num).IsValid() {
			return nil, nil, fmt.Errorf("%s.%s has the protobuf tag %q", typ, field.Name, field.Tag.Get("protobuf"))
		}
		nums = append(nums, protowire.Number(num))
		typ = field.Type
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
	}
	return nums, typ, nil
}

// fieldByJSONName returns the field of the struct typ whose JSON name is name.
func fieldByJSONName(typ reflect.Type, name string) (reflect.StructField, bool) {
	if typ.Kind() != reflect.Struct {
		return reflect.StructField{}, false
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		if jsonName, _, _ := strings.Cut(f.Tag.Get("json"), ","); jsonName == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// messagePlan says, by field number, what to keep of an encoded message; a field past
// its end, or whose plan does not keep it, is dropped.
type messagePlan []fieldPlan

// fieldPlan is what to keep of one field of a message, and of each item if it repeats.
type fieldPlan struct {
	keep bool
	// filter keeps part of the field's message; nil keeps the field whole.
	filter filter
	// readyOnly keeps only the first item whose type is Ready (a pod's conditions).
	readyOnly bool
}

// appendKept appends to dst the fields of the encoded message src that p keeps.
func (p messagePlan) appendKept(dst, src []byte) ([]byte, error) {
	readySeen := false
	return keepFields(dst, src, func(dst []byte, f field) ([]byte, error) {
		if int(f.num) >= len(p) || !p[f.num].keep {
			return dst, nil
		}
		fp := &p[f.num]
		if fp.readyOnly {
			// Only the first Ready condition, as podstate.ReadyCondition reads it.
			conditionType, err := bytesField(f.data, fieldConditionType)
			if err != nil || readySeen || string(conditionType) != string(v1.PodReady) {
				return dst, err
			}
			readySeen = true
		}
		if fp.filter == nil {
			return append(dst, f.all...), nil
		}
		return appendMessage(dst, f, fp.filter)
	})
}

// fieldConditionType is the number of PodCondition's type, which tells a Ready
// condition.
const fieldConditionType = 1
