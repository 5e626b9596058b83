package coord

import (
	"errors"
	"fmt"
	"strings"
)

// PoolsPrefix is the key prefix of every pool's keys.
const PoolsPrefix = "/hermod/pools/"

// endpointsDir is the key element between a pool and its endpoints' names.
const endpointsDir = "/endpoints/"

// configSuffix is the key element after a pool's name in its config key.
const configSuffix = "/config"

// ElectionRootPrefix is the key prefix of every service's leader election.
const ElectionRootPrefix = "/hermod/election/"

// MembersRootPrefix is the key prefix of every service's members.
const MembersRootPrefix = "/hermod/members/"

// ErrInvalidName is returned for a pool or endpoint name that cannot be a key
// element: empty, or containing '/'.
var ErrInvalidName = errors.New("invalid name")

// EndpointsPrefix returns the key prefix of a pool's endpoints,
// /hermod/pools/<pool>/endpoints/. It ends with '/', so it never matches the
// endpoints of another pool whose name starts with pool.
func EndpointsPrefix(pool string) string {
	return PoolsPrefix + pool + endpointsDir
}

// EndpointKey returns the key of an endpoint, /hermod/pools/<pool>/endpoints/<name>.
// It does not validate the names; see ValidatePoolName and ValidateEndpointName.
func EndpointKey(pool, name string) string {
	return EndpointsPrefix(pool) + name
}

// ConfigKey returns the key of a pool's EndpointPickerConfig,
// /hermod/pools/<pool>/config. It does not validate the name.
func ConfigKey(pool string) string {
	return PoolsPrefix + pool + configSuffix
}

// ElectionPrefix returns the key prefix of a service's leader election,
// /hermod/election/<service>/; each candidate holds one key under it. It
// does not validate the name.
func ElectionPrefix(service string) string {
	return ElectionRootPrefix + service + "/"
}

// MembersPrefix returns the key prefix of a service's members,
// /hermod/members/<service>/. It does not validate the name.
func MembersPrefix(service string) string {
	return MembersRootPrefix + service + "/"
}

// MemberKey returns the key of a service's member,
// /hermod/members/<service>/<id>. It does not validate the names.
func MemberKey(service, id string) string {
	return MembersPrefix(service) + id
}

// ParseEndpointKey returns the pool and endpoint names of an endpoint key. It
// fails with ErrInvalidName for a key outside the layout.
func ParseEndpointKey(key string) (pool, name string, err error) {
	rest, ok := strings.CutPrefix(key, PoolsPrefix)
	if !ok {
		return "", "", fmt.Errorf("key %q is not under %s: %w", key, PoolsPrefix, ErrInvalidName)
	}
	pool, name, ok = strings.Cut(rest, endpointsDir)
	if !ok {
		return "", "", fmt.Errorf("key %q is not an endpoint key: %w", key, ErrInvalidName)
	}
	if err := ValidatePoolName(pool); err != nil {
		return "", "", fmt.Errorf("key %q: %w", key, err)
	}
	if err := ValidateEndpointName(name); err != nil {
		return "", "", fmt.Errorf("key %q: %w", key, err)
	}
	return pool, name, nil
}

// ValidatePoolName checks that a pool name can be a key element.
func ValidatePoolName(pool string) error {
	return validateName("pool", pool)
}

// ValidateEndpointName checks that an endpoint name can be a key element.
func ValidateEndpointName(name string) error {
	return validateName("endpoint", name)
}

// ValidateServiceName checks that a service name (of an election or a
// membership) can be a key element.
func ValidateServiceName(service string) error {
	return validateName("service", service)
}

// ValidateMemberID checks that a member id can be a key element.
func ValidateMemberID(id string) error {
	return validateName("member", id)
}

func validateName(kind, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%s name is empty: %w", kind, ErrInvalidName)
	case strings.Contains(s, "/"):
		return fmt.Errorf("%s name %q contains '/': %w", kind, s, ErrInvalidName)
	}
	return nil
}

// AutoscalerRootPrefix is the key prefix of the autoscaler's keys.
const AutoscalerRootPrefix = "/hermod/autoscaler/"

// AutoscalerPrefix returns /hermod/autoscaler/<pool>/, under which the
// autoscaler keeps a pool's variants, analyzer config, statuses and state.
// It does not validate the name.
func AutoscalerPrefix(pool string) string { return AutoscalerRootPrefix + pool + "/" }

// ReplicaTargetsPrefix returns /hermod/autoscaler/<pool>/replicas/, the
// local actuator's replica targets, one key per variant holding a decimal
// count (the devstack's fleet follows them).
func ReplicaTargetsPrefix(pool string) string { return AutoscalerPrefix(pool) + "replicas/" }

// ReplicaTargetKey returns /hermod/autoscaler/<pool>/replicas/<variant>.
func ReplicaTargetKey(pool, variant string) string { return ReplicaTargetsPrefix(pool) + variant }

// AutoscalerVariantsPrefix returns /hermod/autoscaler/<pool>/variants/,
// the applied VariantAutoscaling objects (YAML), one key per variant.
func AutoscalerVariantsPrefix(pool string) string { return AutoscalerPrefix(pool) + "variants/" }

// AutoscalerConfigMapsPrefix returns /hermod/autoscaler/<pool>/configmaps/,
// the applied analyzer ConfigMaps (YAML), one key per ConfigMap name.
func AutoscalerConfigMapsPrefix(pool string) string { return AutoscalerPrefix(pool) + "configmaps/" }
