package main

import (
	"encoding/json"
	"io"
	"reflect"
)

// writeJSON writes v as indented JSON with every list present, [] when empty: encoding/json writes
// a nil slice as null, and a consumer that iterates over "dead" or "processes" should not have to
// tell null from [].
func writeJSON(w io.Writer, v any) error {
	rv := reflect.ValueOf(&v).Elem()
	cp := reflect.New(rv.Elem().Type()).Elem() // v is copied: the caller's value stays as it was
	cp.Set(rv.Elem())
	emptyLists(cp)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(cp.Interface())
}

// emptyLists replaces every nil slice reachable from v through structs, slices and pointers by an
// empty one, copying what it changes below pointers and slices so that nothing shared is written.
func emptyLists(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || !v.CanSet() {
			return
		}
		p := reflect.New(v.Elem().Type())
		p.Elem().Set(v.Elem())
		emptyLists(p.Elem())
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				emptyLists(f)
			}
		}
	case reflect.Slice:
		if !v.CanSet() {
			return
		}
		if v.IsNil() {
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
			return
		}
		cp := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		reflect.Copy(cp, v)
		for i := range cp.Len() {
			emptyLists(cp.Index(i))
		}
		v.Set(cp)
	}
}
