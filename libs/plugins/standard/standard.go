// Package standard registers every plugin of this build with
// scheduling.DefaultRegistry. Binaries import it for its side effect:
//
//	import _ "github.com/hermod/hermod/libs/plugins/standard"
package standard

import (
	// Each package registers its plugin types in init().
	_ "github.com/hermod/hermod/libs/plugins/activerequest"
	_ "github.com/hermod/hermod/libs/plugins/admission"
	_ "github.com/hermod/hermod/libs/plugins/agentidentity"
	_ "github.com/hermod/hermod/libs/plugins/attrreport"
	_ "github.com/hermod/hermod/libs/plugins/burstprefix"
	_ "github.com/hermod/hermod/libs/plugins/contextlength"
	_ "github.com/hermod/hermod/libs/plugins/datalayer"
	_ "github.com/hermod/hermod/libs/plugins/decider"
	_ "github.com/hermod/hermod/libs/plugins/disaggrollout"
	_ "github.com/hermod/hermod/libs/plugins/endpointattribute"
	_ "github.com/hermod/hermod/libs/plugins/filter"
	_ "github.com/hermod/hermod/libs/plugins/flowpolicy"
	_ "github.com/hermod/hermod/libs/plugins/headers"
	_ "github.com/hermod/hermod/libs/plugins/inflightload"
	"github.com/hermod/hermod/libs/plugins/leastrequest"
	_ "github.com/hermod/hermod/libs/plugins/mmcache"
	_ "github.com/hermod/hermod/libs/plugins/nohitlru"
	_ "github.com/hermod/hermod/libs/plugins/p2psource"
	_ "github.com/hermod/hermod/libs/plugins/parser"
	_ "github.com/hermod/hermod/libs/plugins/picker"
	"github.com/hermod/hermod/libs/plugins/preciseprefix"
	_ "github.com/hermod/hermod/libs/plugins/predictedlatency"
	_ "github.com/hermod/hermod/libs/plugins/prefix"
	_ "github.com/hermod/hermod/libs/plugins/profilehandler"
	_ "github.com/hermod/hermod/libs/plugins/responsestore"
	_ "github.com/hermod/hermod/libs/plugins/scorer"
	_ "github.com/hermod/hermod/libs/plugins/servedverifier"
	_ "github.com/hermod/hermod/libs/plugins/session"
	_ "github.com/hermod/hermod/libs/plugins/tokenize"
	_ "github.com/hermod/hermod/libs/plugins/topology"
	_ "github.com/hermod/hermod/libs/plugins/utilization"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/tokenizer"
)

// Unavailable lists plugin types that EndpointPickerConfigs use but this
// build does not provide yet. Naming one is an error ("not available in this
// build"), except that plugins needing a feature gate the config does not
// enable are skipped with a warning, as they would be anyway. Every type of
// the reference documents is built today, so the list is empty.
var Unavailable = []scheduling.Registration{}

// ValidationOptions let every plugin load where none of the services a
// picker provides them runs (hermodctl config validate, devstack's check
// of its config): the indexer is unreachable and any tokenizer model name
// is accepted (the built-in tokenizer stands in).
func ValidationOptions() []scheduling.Option {
	return []scheduling.Option{
		preciseprefix.IndexerService.Provide(preciseprefix.Offline{}),
		preciseprefix.TokenizerService.Provide(preciseprefix.Fixed{Tok: tokenizer.Builtin{}, Tmpl: tokenizer.Llama3Template{}}),
		leastrequest.StoreService.Provide(leastrequest.Offline{}),
	}
}

func init() {
	for _, r := range Unavailable {
		scheduling.Register(r)
	}
}
