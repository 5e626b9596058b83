package coord

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
)

// ErrMalformed is the condition of a registry value that does not decode into
// an Endpoint, or whose name and pool differ from its key's; and of a
// membership value that does not decode into a Member of its key's id.
var ErrMalformed = errors.New("malformed endpoint value")

// KeyError reports one registry or membership key whose entry was skipped. errors.Is(err,
// ErrMalformed) holds for every KeyError.
type KeyError struct {
	// Key is the etcd key of the skipped entry.
	Key string
	// Err says what is wrong with it.
	Err error
}

func (e KeyError) Error() string { return fmt.Sprintf("%s: %v", e.Key, e.Err) }

// Unwrap returns ErrMalformed and the cause.
func (e KeyError) Unwrap() []error { return []error{ErrMalformed, e.Err} }

var (
	marshalOptions = protojson.MarshalOptions{UseProtoNames: true}
	// Unknown fields are dropped, so that readers keep working when writers
	// of a newer version add fields.
	unmarshalOptions = protojson.UnmarshalOptions{DiscardUnknown: true}
)

// EncodeEndpoint returns the registry value of ep (protojson, proto field
// names).
func EncodeEndpoint(ep *registryv1.Endpoint) ([]byte, error) {
	b, err := marshalOptions.Marshal(ep)
	if err != nil {
		return nil, fmt.Errorf("encode endpoint %s/%s: %w", ep.GetPool(), ep.GetName(), err)
	}
	return b, nil
}

// DecodeEndpoint decodes the registry value stored under key. It fails with a
// KeyError when the key is outside the layout, the value is not an Endpoint,
// or the value's name or pool differ from the key's.
func DecodeEndpoint(key string, value []byte) (*registryv1.Endpoint, error) {
	pool, name, err := ParseEndpointKey(key)
	if err != nil {
		return nil, KeyError{Key: key, Err: err}
	}
	ep := &registryv1.Endpoint{}
	if err := unmarshalOptions.Unmarshal(value, ep); err != nil {
		return nil, KeyError{Key: key, Err: fmt.Errorf("decode: %w", err)}
	}
	if ep.GetName() != name || ep.GetPool() != pool {
		return nil, KeyError{Key: key, Err: fmt.Errorf("value names endpoint %q of pool %q", ep.GetName(), ep.GetPool())}
	}
	return ep, nil
}
