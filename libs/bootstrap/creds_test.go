package bootstrap

import (
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/hermod/hermod/testkit/natsembed"
)

// operator is a NATS operator with an account, as nsc would set them up:
// the server trusts the operator, and resolves its accounts from memory.
type operator struct {
	claims  *jwt.OperatorClaims
	account nkeys.KeyPair
	jwts    map[string]string // account public key -> its JWT
	system  string
}

func newOperator(t *testing.T) *operator {
	t.Helper()
	opKP, err := nkeys.CreateOperator()
	must(t, err)
	opPub, err := opKP.PublicKey()
	must(t, err)
	o := &operator{claims: jwt.NewOperatorClaims(opPub), jwts: map[string]string{}}
	o.claims.Name = "hermod-test-operator"
	opJWT, err := o.claims.Encode(opKP)
	must(t, err)
	if o.claims, err = jwt.DecodeOperatorClaims(opJWT); err != nil {
		t.Fatal(err)
	}
	addAccount := func(name string) (nkeys.KeyPair, string) {
		kp, err := nkeys.CreateAccount()
		must(t, err)
		pub, err := kp.PublicKey()
		must(t, err)
		ac := jwt.NewAccountClaims(pub)
		ac.Name = name
		ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
		enc, err := ac.Encode(opKP)
		must(t, err)
		o.jwts[pub] = enc
		return kp, pub
	}
	_, o.system = addAccount("SYS")
	o.account, _ = addAccount("HERMOD")
	return o
}

// configure puts the server in operator mode.
func (o *operator) configure(opts *server.Options) {
	resolver := &server.MemAccResolver{}
	for pub, enc := range o.jwts {
		_ = resolver.Store(pub, enc)
	}
	opts.TrustedOperators = []*jwt.OperatorClaims{o.claims}
	opts.AccountResolver = resolver
	opts.SystemAccount = o.system
}

// creds issues a user of account and returns its .creds file's content.
func creds(t *testing.T, account nkeys.KeyPair, name string) string {
	t.Helper()
	user, err := nkeys.CreateUser()
	must(t, err)
	pub, err := user.PublicKey()
	must(t, err)
	uc := jwt.NewUserClaims(pub)
	uc.Name = name
	enc, err := uc.Encode(account)
	must(t, err)
	seed, err := user.Seed()
	must(t, err)
	b, err := jwt.FormatUserConfig(enc, seed)
	must(t, err)
	return string(b)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A NATS server in operator mode (JWT accounts, as nsc and NGS set up):
// a service connects with a .creds file of a user of a trusted account,
// and is refused with none, with a stranger's, or with a user of an
// account the operator did not sign.
func TestNATSCredsOperatorMode(t *testing.T) {
	op := newOperator(t)
	srv, err := natsembed.Start(natsembed.Options{Configure: op.configure})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	good := creds(t, op.account, "hermod-picker")
	rogueAccount, err := nkeys.CreateAccount() // not signed by the operator
	must(t, err)
	rogue := creds(t, rogueAccount, "rogue")
	runNATSCases(t, srv.ClientURL(), []string{seedOf(good), seedOf(rogue)}, []natsCase{
		{name: "no credentials", sec: NATSSecurity{}, refuse: true},
		{name: "a user of an untrusted account", sec: NATSSecurity{CredsFile: writeSecret(t, "rogue.creds", rogue)}, refuse: true},
		{name: "creds file", sec: NATSSecurity{CredsFile: writeSecret(t, "hermod.creds", good)}},
	})
}

// seedOf is the user seed in a .creds file (a secret errors must not show).
func seedOf(creds string) string {
	seed, err := jwt.ParseDecoratedUserNKey([]byte(creds))
	if err != nil {
		return "unparseable creds"
	}
	s, _ := seed.Seed()
	return string(s)
}
