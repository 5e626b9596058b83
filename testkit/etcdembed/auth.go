package etcdembed

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// User is an etcd user that SetupAuth creates: a password (empty: none,
// so that only a client certificate with the user's name as its common
// name authenticates it) and read-write access to the keys under Prefix.
type User struct {
	Name, Password string
	Prefix         string
}

// SetupAuth turns etcd's authentication on (RBAC, as `etcdctl auth
// enable` does) through cli, a client of a server where it is still off:
// the root user with rootPassword, and for each of users a user with a
// role of its own name granting read-write on its prefix.
func SetupAuth(ctx context.Context, cli *clientv3.Client, rootPassword string, users ...User) error {
	if _, err := cli.UserAdd(ctx, "root", rootPassword); err != nil {
		return fmt.Errorf("etcdembed: add root: %w", err)
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		return fmt.Errorf("etcdembed: grant root: %w", err)
	}
	for _, u := range users {
		var err error
		if u.Password == "" {
			_, err = cli.UserAddWithOptions(ctx, u.Name, "", &clientv3.UserAddOptions{NoPassword: true})
		} else {
			_, err = cli.UserAdd(ctx, u.Name, u.Password)
		}
		if err != nil {
			return fmt.Errorf("etcdembed: add user %s: %w", u.Name, err)
		}
		if _, err := cli.RoleAdd(ctx, u.Name); err != nil {
			return fmt.Errorf("etcdembed: add role %s: %w", u.Name, err)
		}
		end := clientv3.GetPrefixRangeEnd(u.Prefix)
		if _, err := cli.RoleGrantPermission(ctx, u.Name, u.Prefix, end, clientv3.PermissionType(clientv3.PermReadWrite)); err != nil {
			return fmt.Errorf("etcdembed: grant %s on %s: %w", u.Name, u.Prefix, err)
		}
		if _, err := cli.UserGrantRole(ctx, u.Name, u.Name); err != nil {
			return fmt.Errorf("etcdembed: grant role %s: %w", u.Name, err)
		}
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		return fmt.Errorf("etcdembed: enable auth: %w", err)
	}
	return nil
}
