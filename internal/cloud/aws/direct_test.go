package aws

import (
	"reflect"
	"testing"
)

// The structs the provider's SDK clients are handed over in hold only
// functions (method values): a field of a client's type would make the linker
// keep all of that client's operations (direct.go).
func TestDirectClientsHoldOnlyFunctions(t *testing.T) {
	for _, v := range []any{ec2Direct{}, autoScalingDirect{}} {
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			if f := typ.Field(i); f.Type.Kind() != reflect.Func {
				t.Errorf("%s.%s is a %s, not a function", typ.Name(), f.Name, f.Type)
			}
		}
	}
}
