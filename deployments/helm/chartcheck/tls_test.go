package chartcheck

import (
	"path"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// The flags whose file holds a secret (a key, a password, a token, an NKey
// seed, a .creds file): the volume behind it must be the operator's Secret
// (or cert-manager's), never a ConfigMap.
var secretFileFlags = []string{
	"grpc-tls-key-file", "etcd-key-file", "nats-key-file",
	"etcd-password-file", "nats-password-file", "nats-token-file", "nats-nkey-file", "nats-creds-file",
	"ops-token-file", "api-keys-file",
}

// The flags that carry TLS or credentials; none is given by default.
var securityFlags = []string{
	"grpc-tls-ca-file", "grpc-tls-cert-file", "grpc-tls-key-file", "grpc-tls-client-auth", "grpc-tls-server-name", "grpc-authz-file",
	"etcd-ca-file", "etcd-cert-file", "etcd-key-file", "etcd-server-name", "etcd-username", "etcd-password-file",
	"nats-ca-file", "nats-cert-file", "nats-key-file", "nats-user", "nats-password-file", "nats-token-file", "nats-nkey-file", "nats-creds-file",
	"ops-token-file",
}

// mountedFile finds the volume behind a file path of a container: the
// mount whose directory holds it (never a subPath mount: a rotated
// Secret or an edited ConfigMap would not reach it) and the pod's volume.
func mountedFile(d *appsv1.Deployment, c *corev1.Container, file string) (*corev1.VolumeMount, *corev1.Volume) {
	for i := range c.VolumeMounts {
		m := &c.VolumeMounts[i]
		if m.SubPath != "" || !strings.HasPrefix(path.Clean(file), path.Clean(m.MountPath)+"/") {
			continue
		}
		for j := range d.Spec.Template.Spec.Volumes {
			if v := &d.Spec.Template.Spec.Volumes[j]; v.Name == m.Name {
				return m, v
			}
		}
		return m, nil
	}
	return nil, nil
}

// volumeSecrets returns the Secrets a volume projects, and whether it
// projects anything else (a ConfigMap).
func volumeSecrets(v *corev1.Volume) (secrets []string, other bool) {
	switch {
	case v.Secret != nil:
		return []string{v.Secret.SecretName}, false
	case v.Projected != nil:
		for _, s := range v.Projected.Sources {
			if s.Secret != nil {
				secrets = append(secrets, s.Secret.Name)
			} else {
				other = true
			}
		}
		return secrets, other
	}
	return nil, true
}

// fileSource returns the kind (Secret, ConfigMap, other) and name of what
// puts the file base at a volume's root.
func fileSource(v *corev1.Volume, base string) (kind, name string) {
	has := func(items []corev1.KeyToPath) bool {
		return items == nil || slices.ContainsFunc(items, func(k corev1.KeyToPath) bool { return k.Path == base })
	}
	switch {
	case v.Secret != nil:
		return "Secret", v.Secret.SecretName
	case v.ConfigMap != nil:
		return "ConfigMap", v.ConfigMap.Name
	case v.Projected != nil:
		for _, s := range v.Projected.Sources {
			switch {
			case s.Secret != nil && has(s.Secret.Items):
				return "Secret", s.Secret.Name
			case s.ConfigMap != nil && has(s.ConfigMap.Items):
				return "ConfigMap", s.ConfigMap.Name
			}
		}
	}
	return "other", ""
}

// fileItem reports whether a volume puts a file named base at its root
// (the items of a Secret, ConfigMap or projected source; a volume without
// items holds every key, which cannot be checked here).
func fileItem(v *corev1.Volume, base string) bool {
	has := func(items []corev1.KeyToPath) bool {
		return items == nil || slices.ContainsFunc(items, func(k corev1.KeyToPath) bool { return k.Path == base })
	}
	switch {
	case v.Secret != nil:
		return has(v.Secret.Items)
	case v.ConfigMap != nil:
		return has(v.ConfigMap.Items)
	case v.Projected != nil:
		for _, s := range v.Projected.Sources {
			switch {
			case s.Secret != nil && has(s.Secret.Items), s.ConfigMap != nil && has(s.ConfigMap.Items):
				return true
			}
		}
	}
	return false
}

// checkFileArgs: every argument naming a file (--x-file=/path, a config
// @/path or /path) names one of a mounted directory volume, read-only,
// whose items hold it; the files of secretFileFlags come from Secrets only.
func checkFileArgs(t *testing.T, o *object, d *appsv1.Deployment) {
	t.Helper()
	for i := range d.Spec.Template.Spec.Containers {
		c := &d.Spec.Template.Spec.Containers[i]
		for _, a := range c.Args {
			name, value, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			file := strings.TrimPrefix(value, "@")
			if !strings.HasSuffix(name, "-file") && !strings.HasPrefix(file, "/") {
				continue
			}
			if !strings.HasPrefix(file, "/") {
				t.Errorf("%s: container %s: --%s=%q is not an absolute path", o.Source, c.Name, name, value)
				continue
			}
			m, v := mountedFile(d, c, file)
			if m == nil || v == nil {
				t.Errorf("%s: container %s: --%s=%s is on no mounted volume (or on a subPath mount)", o.Source, c.Name, name, value)
				continue
			}
			if v.EmptyDir == nil && !m.ReadOnly {
				t.Errorf("%s: container %s: volume %s behind --%s is mounted read-write", o.Source, c.Name, v.Name, name)
			}
			if path.Dir(file) == path.Clean(m.MountPath) && !fileItem(v, path.Base(file)) {
				t.Errorf("%s: container %s: --%s=%s: volume %s has no item %s", o.Source, c.Name, name, value, v.Name, path.Base(file))
			}
			if slices.Contains(secretFileFlags, name) {
				if kind, _ := fileSource(v, path.Base(file)); kind != "Secret" {
					t.Errorf("%s: container %s: --%s=%s comes from a %s (volume %s), not a Secret", o.Source, c.Name, name, value, kind, v.Name)
				}
			}
		}
	}
}

// fileVolume returns the volume behind --flag's file, failing the test
// when there is none.
func fileVolume(t *testing.T, d *appsv1.Deployment, c *corev1.Container, flag string) *corev1.Volume {
	t.Helper()
	file, ok := argValue(c.Args, flag)
	if !ok {
		t.Errorf("%s: no --%s", c.Name, flag)
		return &corev1.Volume{}
	}
	_, v := mountedFile(d, c, file)
	if v == nil {
		t.Errorf("%s: --%s=%s is on no volume", c.Name, flag, file)
		return &corev1.Volume{}
	}
	return v
}

// certificates returns the rendered cert-manager Certificates by name.
func certificates(r *rendered) map[string]*certificate {
	out := map[string]*certificate{}
	for _, o := range r.byKind("Certificate") {
		out[o.Meta.GetName()] = o.Obj.(*certificate)
	}
	return out
}

// TestTLSOffByDefault: the defaults are plaintext: no TLS or credential
// flag, no Secret volume, no Certificate, no bearer token on the
// ServiceMonitors (with them on).
func TestTLSOffByDefault(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{nil, {"--set", "global.serviceMonitor.enabled=true"}} {
		r := render(t, args...)
		check(t, r)
		if n := len(r.byKind("Certificate")); n != 0 {
			t.Errorf("%v: %d Certificates", args, n)
		}
		for _, svc := range services {
			d, c := container(t, r, svc)
			for _, f := range securityFlags {
				if v, ok := argValue(c.Args, f); ok {
					t.Errorf("%v: %s: --%s=%s by default", args, svc, f, v)
				}
			}
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Secret != nil || v.Projected != nil {
					t.Errorf("%v: %s: volume %s from Secrets by default", args, svc, v.Name)
				}
			}
		}
		for _, o := range r.byKind("ServiceMonitor") {
			for _, ep := range o.Obj.(*serviceMonitor).Spec.Endpoints {
				if ep.BearerTokenSecret != nil || ep.Scheme != "http" {
					t.Errorf("%v: %s: endpoint %+v", args, o.key(), ep)
				}
			}
		}
	}
}

// TestTLSFull: with the full values every service gets its gRPC
// certificate (a cert-manager Certificate for spiffe://hermod/<service>),
// the CA, client auth require and the policy; etcd, NATS and the ops port
// their TLS files and credentials as files of the operator's Secrets.
func TestTLSFull(t *testing.T) {
	t.Parallel()
	r := render(t, fullArgs(t)...)
	certs := certificates(r)

	for _, svc := range services {
		t.Run(svc, func(t *testing.T) {
			name := release + "-" + svc
			d, c := container(t, r, svc)

			// gRPC: the service's Certificate's Secret, one directory
			secret := name + "-grpc-tls"
			for _, f := range []string{"grpc-tls-ca-file", "grpc-tls-cert-file", "grpc-tls-key-file"} {
				v := fileVolume(t, d, c, f)
				if secrets, other := volumeSecrets(v); !slices.Equal(secrets, []string{secret}) || other {
					t.Errorf("--%s on volume %s from %v, want Secret %s only", f, v.Name, secrets, secret)
				}
			}
			if v, _ := argValue(c.Args, "grpc-tls-client-auth"); v != "require" {
				t.Errorf("--grpc-tls-client-auth=%q, want require", v)
			}
			cert := certs[name+"-grpc"]
			if cert == nil {
				t.Fatalf("no Certificate %s-grpc", name)
			}
			if cert.Spec.SecretName != secret {
				t.Errorf("Certificate secretName %s, want %s (the Secret the pods mount)", cert.Spec.SecretName, secret)
			}
			if want := []string{"spiffe://hermod/" + svc}; !slices.Equal(cert.Spec.URIs, want) {
				t.Errorf("Certificate uris %v, want %v", cert.Spec.URIs, want)
			}
			for _, u := range []string{"server auth", "client auth"} {
				if !slices.Contains(cert.Spec.Usages, u) {
					t.Errorf("Certificate usages %v lack %q", cert.Spec.Usages, u)
				}
			}
			if cert.Spec.IssuerRef.Name != "hermod-ca" || cert.Spec.IssuerRef.Kind != "ClusterIssuer" || cert.Spec.Duration != "720h" || cert.Spec.RenewBefore != "240h" {
				t.Errorf("Certificate issuer %+v, duration %s, renewBefore %s", cert.Spec.IssuerRef, cert.Spec.Duration, cert.Spec.RenewBefore)
			}
			// the names clients dial (hermod-common.address: <name>.<ns>.svc) and the headless Service's
			wantDNS := []string{name + "." + namespace + ".svc"}
			for _, o := range r.byKind("Service") {
				if o.component() == svc && o.Meta.GetName() != name+"-ops" {
					wantDNS = append(wantDNS, o.Meta.GetName()+"."+namespace+".svc")
				}
			}
			for _, n := range wantDNS {
				if !slices.Contains(cert.Spec.DNSNames, n) {
					t.Errorf("Certificate dnsNames %v lack %s", cert.Spec.DNSNames, n)
				}
			}

			// the policy: a ConfigMap for the services serving gRPC
			_, servesGRPC := argValue(c.Args, "listen")
			servesGRPC = servesGRPC && svc != "gateway"
			if _, ok := argValue(c.Args, "grpc-authz-file"); ok != servesGRPC {
				t.Errorf("--grpc-authz-file given %v, want %v (serves gRPC)", ok, servesGRPC)
			} else if ok {
				if v := fileVolume(t, d, c, "grpc-authz-file"); v.ConfigMap == nil || v.ConfigMap.Name != name+"-grpc-authz" {
					t.Errorf("--grpc-authz-file on volume %+v, want ConfigMap %s-grpc-authz", v, name)
				}
				if d.Spec.Template.Annotations["checksum/grpc-authz"] == "" {
					t.Error("no checksum/grpc-authz annotation: a policy change would not roll the pods")
				}
			}

			// etcd and NATS (responses talks to neither with store.type tiered)
			stores := map[string]string{"etcd-ca-file": "hermod-etcd-tls", "etcd-cert-file": "hermod-etcd-tls", "etcd-key-file": "hermod-etcd-tls", "etcd-password-file": "hermod-etcd",
				"nats-ca-file": "hermod-nats-tls", "nats-cert-file": "hermod-nats-tls", "nats-key-file": "hermod-nats-tls", "nats-password-file": "hermod-nats",
				"ops-token-file": "hermod-ops"}
			for f, want := range stores {
				if svc == "responses" && f != "ops-token-file" {
					if _, ok := argValue(c.Args, f); ok {
						t.Errorf("--%s given to responses, which uses neither etcd nor NATS here", f)
					}
					continue
				}
				v := fileVolume(t, d, c, f)
				if secrets, _ := volumeSecrets(v); !slices.Equal(secrets, []string{want}) {
					t.Errorf("--%s on volume %s from %v, want Secret %s", f, v.Name, secrets, want)
				}
			}
			if svc != "responses" {
				for f, want := range map[string]string{"etcd-username": "hermod", "nats-user": "hermod", "etcd-server-name": "etcd.infra.svc"} {
					if v, _ := argValue(c.Args, f); v != want {
						t.Errorf("--%s=%q, want %q", f, v, want)
					}
				}
			}
			// every mount of a Secret is read-only and a whole directory
			for _, m := range c.VolumeMounts {
				if m.SubPath != "" {
					t.Errorf("mount %s uses subPath %s: rotations would not reach the pod", m.Name, m.SubPath)
				}
			}
		})
	}

	t.Run("envoy client certificate", func(t *testing.T) {
		var envoy *certificate
		for _, o := range r.byKind("Certificate") {
			if o.Meta.GetName() == release+"-envoy-grpc" {
				envoy = o.Obj.(*certificate)
			}
		}
		if envoy == nil {
			t.Fatal("no Certificate hermod-envoy-grpc")
		}
		if envoy.Namespace != "envoy-gateway-system" || !slices.Equal(envoy.Spec.URIs, []string{"spiffe://hermod/envoy"}) ||
			!slices.Contains(envoy.Spec.Usages, "client auth") || slices.Contains(envoy.Spec.Usages, "server auth") {
			t.Errorf("envoy Certificate in %s: uris %v, usages %v", envoy.Namespace, envoy.Spec.URIs, envoy.Spec.Usages)
		}
		if len(certs) != len(services)+1 {
			t.Errorf("%d Certificates, want one per service and Envoy's", len(certs))
		}
	})

	t.Run("service monitors", func(t *testing.T) {
		for _, o := range r.byKind("ServiceMonitor") {
			for _, ep := range o.Obj.(*serviceMonitor).Spec.Endpoints {
				if b := ep.BearerTokenSecret; b == nil || b.Name != "hermod-ops" || b.Key != "token" {
					t.Errorf("%s: endpoint %s: bearerTokenSecret %+v, want hermod-ops/token", o.key(), ep.Port, b)
				}
			}
		}
	})

	t.Run("responses store files", func(t *testing.T) {
		d, c := container(t, r, "responses")
		e := envVar(c, "HERMOD_STORE_CONFIG")
		if e == nil {
			t.Fatal("no HERMOD_STORE_CONFIG")
		}
		for file, secret := range map[string]string{
			"/etc/hermod/secrets/valkey/password": "hermod-valkey", "/etc/hermod/tls/valkey/ca.crt": "hermod-valkey-tls",
			"/etc/hermod/tls/valkey/tls.key": "hermod-valkey-tls", "/etc/hermod/secrets/mongodb/password": "hermod-mongodb",
			"/etc/hermod/tls/mongodb/ca.crt": "hermod-mongodb-tls",
		} {
			if !strings.Contains(e.Value, `"`+file+`"`) {
				t.Errorf("store config does not name %s: %s", file, e.Value)
			}
			_, v := mountedFile(d, c, file)
			if v == nil {
				t.Errorf("%s is on no volume", file)
				continue
			}
			if secrets, _ := volumeSecrets(v); !slices.Equal(secrets, []string{secret}) || !fileItem(v, path.Base(file)) {
				t.Errorf("%s on volume %s from %v, want Secret %s", file, v.Name, secrets, secret)
			}
		}
	})
}

// TestTLSExistingSecrets: without cert-manager the certificates come from
// the operator's Secrets (a service's own name or the default), the CA
// from a ConfigMap when given, and the picker may take Envoy without a
// client certificate (clientAuth optional) while the others require one.
func TestTLSExistingSecrets(t *testing.T) {
	t.Parallel()
	r := render(t, "--set", "global.tls.enabled=true",
		"--set", "picker.tls.clientAuth=optional", "--set", "picker.tls.existingSecret=picker-cert",
		"--set", "global.tls.ca.configMap=hermod-ca-bundle", "--set", "global.tls.serverName=hermod.internal")
	check(t, r)
	if n := len(r.byKind("Certificate")); n != 0 {
		t.Errorf("%d Certificates without certManager.enabled", n)
	}
	base := render(t)
	if !slicesEqualKeys(r.keys(), base.keys()) {
		t.Errorf("TLS from existing Secrets changed the set of objects:\n%v\nwant\n%v", sortedKeys(r.keys()), sortedKeys(base.keys()))
	}
	for _, svc := range services {
		d, c := container(t, r, svc)
		want := release + "-" + svc + "-grpc-tls"
		mode := "require"
		if svc == "picker" {
			want, mode = "picker-cert", "optional"
		}
		if v, _ := argValue(c.Args, "grpc-tls-client-auth"); v != mode {
			t.Errorf("%s: --grpc-tls-client-auth=%q, want %s", svc, v, mode)
		}
		if v, _ := argValue(c.Args, "grpc-tls-server-name"); v != "hermod.internal" {
			t.Errorf("%s: --grpc-tls-server-name=%q", svc, v)
		}
		v := fileVolume(t, d, c, "grpc-tls-cert-file")
		if secrets, other := volumeSecrets(v); !slices.Equal(secrets, []string{want}) || !other {
			t.Errorf("%s: certificate volume from %v (and a ConfigMap: %v), want Secret %s and the CA ConfigMap", svc, secrets, other, want)
		}
		if v.Projected == nil || !slices.ContainsFunc(v.Projected.Sources, func(s corev1.VolumeProjection) bool {
			return s.ConfigMap != nil && s.ConfigMap.Name == "hermod-ca-bundle" && len(s.ConfigMap.Items) == 1 && s.ConfigMap.Items[0].Path == "ca.crt"
		}) {
			t.Errorf("%s: ca.crt does not come from ConfigMap hermod-ca-bundle: %+v", svc, v)
		}
		for base, want := range map[string]string{"tls.crt": "Secret/" + want, "tls.key": "Secret/" + want, "ca.crt": "ConfigMap/hermod-ca-bundle"} {
			if kind, name := fileSource(v, base); kind+"/"+name != want {
				t.Errorf("%s: %s from %s/%s, want %s", svc, base, kind, name, want)
			}
		}
		if _, ok := argValue(c.Args, "grpc-authz-file"); ok {
			t.Errorf("%s: --grpc-authz-file without global.tls.authzPolicy", svc)
		}
	}
}

func slicesEqualKeys(a, b map[string]bool) bool {
	return slices.Equal(sortedKeys(a), sortedKeys(b))
}

// TestTLSRefusals: settings that cannot work fail the render with a
// message naming the value, instead of pods that never become ready.
func TestTLSRefusals(t *testing.T) {
	t.Parallel()
	repo := needRepo(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--set", "global.tls.enabled=true", "--set", "picker.probes.type=grpc"}, "plaintext"},
		{[]string{"--set", "global.tls.enabled=true", "--set", "global.tls.certManager.enabled=true"}, "issuerRef.name is required"},
		{[]string{"--set", "global.tls.enabled=true", "--set", "global.tls.ca.configMap=a", "--set", "global.tls.ca.existingSecret=b"}, "not both"},
		{[]string{"--set", "global.etcd.tls.enabled=true"}, "global.etcd.tls.existingSecret is required"},
		{[]string{"--set", "global.etcd.auth.username=hermod"}, "global.etcd.auth.existingSecret is required"},
		{[]string{"--set", "global.nats.auth.type=token"}, "global.nats.auth.existingSecret is required"},
		{[]string{"--set", "global.nats.auth.type=user", "--set", "global.nats.auth.existingSecret=n"}, "global.nats.auth.user is required"},
		{[]string{"--set", "global.nats.auth.type=password"}, "/global/nats/auth/type"},
		{[]string{"--set", "global.tls.clientAuth=maybe"}, "/global/tls/clientAuth"},
	} {
		_, err := repo.template(tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one mentioning %q", tc.args, err, tc.want)
		}
	}
}
