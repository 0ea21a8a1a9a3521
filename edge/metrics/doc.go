// Package metrics is the Prometheus collector over a node's admission
// state: admissions, rejections by error, leaked permits, every scope's
// reserved capacity and limits, and the load signal.
//
// # Series
//
//	latent_admission_admitted_total               counter
//	latent_admission_rejected_total               counter  code, scope, dimension, reason, retryable
//	latent_admission_leaked_permits_total         counter
//	latent_admission_reserved                     gauge    scope, name, dimension
//	latent_admission_limit                        gauge    scope, name, dimension
//	latent_admission_load_pressure                gauge    resource (cpu, memory)
//	latent_admission_load_sample_age_seconds      gauge
//	latent_admission_load_publish_rejected_total  counter
//
// rejected_total has one series per distinct row of core.AllErrors, zero
// counts included, so a rate query never sees a series appear. reserved
// and limit cover the node (name ""), every tenant and trust class (all
// four dimensions: live-activations, queued-reservations, cpu-fuel,
// memory-bytes), every queue class (queued-reservations against
// max_queued) and every configured cell class (live-activations, reserved
// only: admission gives a cell class no limit of its own). The load
// series are present only with a load state, and pressure and age only
// while it holds a sample.
//
// # Cost and cardinality
//
// The collector keeps no counters of its own and adds nothing to the
// admission path: Collect reads core's striped counters, one
// [core.LocalQuotaProvider.Usage] (the ledger's mutex, taken once, so a
// scrape is consistent across scopes) and the load state's current
// sample. Label values are fixed vocabulary and the policy's configured
// names, never a request's string, so the series are fixed when the
// provider is built: a flood naming 10,000 unknown tenants adds none.
//
// # Caveats
//
// latent_node_activations_total and latent_node_queue_wait_seconds
// (the node series in docs/edge.md) belong to latentd, which will register them
// beside this collector.
package metrics
