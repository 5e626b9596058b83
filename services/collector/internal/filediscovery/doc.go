// Package filediscovery keeps a pool's endpoint registry in etcd equal to an
// endpoints file: the model servers Hermod did not start (VMs, bare metal,
// Slurm jobs) that an operator lists in YAML or JSON, one entry per endpoint
// with the fields of `hermodctl endpoints register` (see File and
// coord.EndpointSpec), or written as the llm-d router's file-discovery
// writes them (name, namespace, an IPv4 address, port, labels; see
// FileEntry). The collector follows the file its --endpoints-file flag
// names, or else the one the pool's EndpointPickerConfig names with a
// file-discovery plugin in dataLayer.discovery.
//
// Every collector replica reads the file (a Kubernetes ConfigMap mounted in
// each, or a file on a shared disk) and polls it every interval (unless
// Config.Once, file-discovery's watchFile: false, has it read once): reading
// the path anew follows every way of replacing it, writes in place, renames
// over it, the ..data symlink swap of a mounted ConfigMap, and works on
// network filesystems where inotify does not. A changed file is applied
// once two polls in a row have seen the same content, so that one caught
// while being written is not. An unreadable or invalid file (bad YAML, an
// unknown field, an invalid or duplicate entry, a missing file) changes
// nothing: the entries of the last good version stay registered, an error
// naming the file, lines and entries is logged, and the metrics say so
// (hermod_collector_endpoints_file_reloads_total{result="error"},
// hermod_collector_endpoints_file_valid 0). To deregister every entry,
// write "endpoints: []". A collector does not start with a bad file.
//
// One replica per pool writes: the registrysync.Writer of each replica
// campaigns for /hermod/election/endpoints-file-<pool>, and the leader
// writes every entry bound to a lease it keeps alive, labelled
// hermod.io/discovered-by=file, and deletes the entries with that label
// that the file no longer lists. Entries registered otherwise (by a pod
// itself, hermodctl, or Kubernetes discovery) are never touched, also when
// one holds the name of a file entry. If every collector dies, the entries
// disappear one lease TTL later. See registrysync for elections, fencing
// and retries.
package filediscovery
