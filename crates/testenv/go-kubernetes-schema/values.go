// Reading a state's JSON into typed values, and comparing values by what they hold.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// decodeState reads the attributes JSON of a state instance as a value of the block's type.
// Attributes the schema lacks are dropped; a missing or null nested list block is empty.
func decodeState(b block, raw []byte) (tftypes.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v map[string]interface{}
	if err := dec.Decode(&v); err != nil {
		return tftypes.Value{}, fmt.Errorf("the state is not a JSON object: %w", err)
	}
	return decodeBlock(b, v, "")
}

func decodeBlock(b block, v map[string]interface{}, at string) (tftypes.Value, error) {
	vals := map[string]tftypes.Value{}
	for _, a := range b.attrs {
		val, err := fromJSON(a.typ, v[a.name], at+a.name)
		if err != nil {
			return tftypes.Value{}, err
		}
		vals[a.name] = val
	}
	for _, n := range b.blocks {
		typ := n.objectType()
		if n.single {
			m, _ := v[n.name].(map[string]interface{})
			if m == nil {
				vals[n.name] = tftypes.NewValue(typ, nil)
				continue
			}
			val, err := decodeBlock(n, m, at+n.name+".")
			if err != nil {
				return tftypes.Value{}, err
			}
			vals[n.name] = val
			continue
		}
		items, ok := v[n.name].([]interface{})
		if !ok && v[n.name] != nil {
			return tftypes.Value{}, fmt.Errorf("%s%s: a block list must be a JSON array", at, n.name)
		}
		elems := []tftypes.Value{}
		for i, item := range items {
			m, ok := item.(map[string]interface{})
			if !ok {
				return tftypes.Value{}, fmt.Errorf("%s%s[%d]: a block must be a JSON object", at, n.name, i)
			}
			val, err := decodeBlock(n, m, fmt.Sprintf("%s%s[%d].", at, n.name, i))
			if err != nil {
				return tftypes.Value{}, err
			}
			elems = append(elems, val)
		}
		vals[n.name] = tftypes.NewValue(tftypes.List{ElementType: typ}, elems)
	}
	return tftypes.NewValue(b.objectType(), vals), nil
}

// fromJSON reads one attribute. A dynamic attribute may be stored wrapped ({"value", "type"}, as
// tofu writes it) or bare; either way its type is inferred from the JSON.
func fromJSON(t tftypes.Type, v interface{}, at string) (tftypes.Value, error) {
	if v == nil {
		return tftypes.NewValue(t, nil), nil
	}
	wrong := func(want string) (tftypes.Value, error) {
		return tftypes.Value{}, fmt.Errorf("%s: want %s, the state holds %v", at, want, v)
	}
	switch {
	case t.Is(tftypes.DynamicPseudoType):
		if m, ok := v.(map[string]interface{}); ok && len(m) == 2 && m["type"] != nil {
			if inner, ok := m["value"]; ok {
				v = inner
			}
		}
		return infer(v), nil
	case t.Is(tftypes.String):
		if s, ok := v.(string); ok {
			return tftypes.NewValue(t, s), nil
		}
		return wrong("a string")
	case t.Is(tftypes.Bool):
		if b, ok := v.(bool); ok {
			return tftypes.NewValue(t, b), nil
		}
		return wrong("a bool")
	case t.Is(tftypes.Number):
		if n, ok := v.(json.Number); ok {
			f, _, err := big.ParseFloat(n.String(), 10, 512, big.ToNearestEven)
			if err == nil {
				return tftypes.NewValue(t, f), nil
			}
		}
		return wrong("a number")
	}
	switch tt := t.(type) {
	case tftypes.List, tftypes.Set:
		var elem tftypes.Type
		if l, ok := tt.(tftypes.List); ok {
			elem = l.ElementType
		} else {
			elem = tt.(tftypes.Set).ElementType
		}
		items, ok := v.([]interface{})
		if !ok {
			return wrong("an array")
		}
		elems := []tftypes.Value{}
		for i, item := range items {
			e, err := fromJSON(elem, item, fmt.Sprintf("%s[%d]", at, i))
			if err != nil {
				return tftypes.Value{}, err
			}
			elems = append(elems, e)
		}
		return tftypes.NewValue(t, elems), nil
	case tftypes.Map:
		m, ok := v.(map[string]interface{})
		if !ok {
			return wrong("an object")
		}
		vals := map[string]tftypes.Value{}
		for k, item := range m {
			e, err := fromJSON(tt.ElementType, item, at+"."+k)
			if err != nil {
				return tftypes.Value{}, err
			}
			vals[k] = e
		}
		return tftypes.NewValue(t, vals), nil
	case tftypes.Object:
		m, ok := v.(map[string]interface{})
		if !ok {
			return wrong("an object")
		}
		vals := map[string]tftypes.Value{}
		for k, at2 := range tt.AttributeTypes {
			e, err := fromJSON(at2, m[k], at+"."+k)
			if err != nil {
				return tftypes.Value{}, err
			}
			vals[k] = e
		}
		return tftypes.NewValue(t, vals), nil
	}
	return wrong(t.String())
}

// infer types bare JSON as HCL would: objects, tuples, strings, numbers, bools; null a null string.
func infer(v interface{}) tftypes.Value {
	switch x := v.(type) {
	case map[string]interface{}:
		types := map[string]tftypes.Type{}
		vals := map[string]tftypes.Value{}
		for k, item := range x {
			vals[k] = infer(item)
			types[k] = vals[k].Type()
		}
		return tftypes.NewValue(tftypes.Object{AttributeTypes: types}, vals)
	case []interface{}:
		types := []tftypes.Type{}
		vals := []tftypes.Value{}
		for _, item := range x {
			e := infer(item)
			types = append(types, e.Type())
			vals = append(vals, e)
		}
		return tftypes.NewValue(tftypes.Tuple{ElementTypes: types}, vals)
	case string:
		return tftypes.NewValue(tftypes.String, x)
	case bool:
		return tftypes.NewValue(tftypes.Bool, x)
	case json.Number:
		f, _, err := big.ParseFloat(x.String(), 10, 512, big.ToNearestEven)
		if err == nil {
			return tftypes.NewValue(tftypes.Number, f)
		}
	}
	return tftypes.NewValue(tftypes.String, nil)
}

// plain is what a known value holds, with maps and objects alike, lists, sets and tuples alike,
// numbers as decimal text, and null attributes dropped: two manifests that render the same JSON
// are equal.
func plain(v tftypes.Value) interface{} {
	if v.IsNull() {
		return nil
	}
	t := v.Type()
	switch {
	case t.Is(tftypes.String):
		var s string
		_ = v.As(&s)
		return s
	case t.Is(tftypes.Bool):
		var b bool
		_ = v.As(&b)
		return b
	case t.Is(tftypes.Number):
		f := new(big.Float)
		_ = v.As(&f)
		return f.Text('g', -1)
	}
	switch t.(type) {
	case tftypes.List, tftypes.Set, tftypes.Tuple:
		var items []tftypes.Value
		_ = v.As(&items)
		out := []interface{}{}
		for _, item := range items {
			out = append(out, plain(item))
		}
		return out
	case tftypes.Map, tftypes.Object:
		var m map[string]tftypes.Value
		_ = v.As(&m)
		out := map[string]interface{}{}
		for k, item := range m {
			if p := plain(item); p != nil {
				out[k] = p
			}
		}
		return out
	}
	return nil
}
