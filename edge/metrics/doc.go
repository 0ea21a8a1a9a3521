// Package metrics is the Prometheus collector over a node's admission
// state: admissions, rejections by error, leaked permits, every scope's
// reserved capacity and limits, and the load signal; and, when given the
// node's runner and scheduler, activations by outcome and queue waits.
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
//	latent_node_activations_total                 counter    outcome
//	latent_node_queue_wait_seconds                histogram  queue_class
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
// admission path: Collect reads core's operator counters, one
// [core.LocalQuotaProvider.Usage] (the ledger's exact-path locks, taken once, so a
// scrape is consistent across scopes) and the load state's current
// sample; the runner's outcome counters ([runner.Runner.Count]) and the
// scheduler's queue-wait histograms ([scheduler.Scheduler.QueueWaits]),
// which they keep with atomics whether or not anything scrapes. Label
// values are fixed vocabulary and the policy's configured
// names, never a request's string, so the series are fixed when the
// provider is built: a flood naming 10,000 unknown tenants adds none.
//
// # Activation outcomes
//
// latent_node_activations_total (present with Config.Runner) has the
// seven series of docs/edge.md, zeros included. Each executed activation
// counts once: the runner counts it under its outcome and what became of
// its cell, and the collector maps those pairs onto the labels.
//
//	runner outcome    cell released      cell quarantined
//	Succeeded         success            uncertain-cleanup
//	DeclaredError     declared-error     uncertain-cleanup
//	Trapped           trap               uncertain-cleanup
//	MemoryExhausted   trap               uncertain-cleanup
//	DeadlineExceeded  deadline           uncertain-cleanup
//	Canceled          deadline           uncertain-cleanup
//	FuelExhausted     fuel               uncertain-cleanup
//	PlatformFailure   platform-failure   uncertain-cleanup
//
// uncertain-cleanup is a quarantined cell: the backend could not vouch
// for it (Reset failed or panicked, or Run panicked, so nothing it said
// could be trusted), the cell left usable capacity, and that is what an
// operator must see, whatever the guest did, so it takes precedence over
// the outcome. Two outcomes have no label of their own.
// MemoryExhausted is trap: the guest overran its memory grant, a guest
// fault like a trap (a Wasm memory.grow past the limiter traps), and
// neither the node's failure nor a budget with its own series. Canceled
// is deadline: the activation's context ended before the guest finished,
// because its caller gave up rather than because its grant ran out;
// either way the runner interrupted a guest that was not at fault, on a
// node that was not either, so platform-failure, which should page, is
// kept for the node's own failures. NotRun is never counted: an
// activation the scheduler dropped never reached the runner (the
// scheduler's Stats count those). Every pair only grows, so every series
// does, read pair by pair without a lock.
//
// # Queue waits
//
// latent_node_queue_wait_seconds (present with Config.Scheduler) has one
// histogram per configured queue class, over the fixed buckets of
// [scheduler.QueueWaitBounds] (1ms to 30s). A wait is measured on the
// scheduler's clock from Submit to the dispatcher taking the activation
// off its queue onto a cell; the scheduler records it with atomic adds
// and no allocation, and the collector converts it at scrape time.
// Activations dropped from the queue (cancelled, expired, closed) are not
// in it. _count is the sum of the buckets read, so no bucket exceeds it;
// _sum, read separately, may be one wait ahead or behind under load.
//
// # Caveats
//
// The runner and the scheduler are the caller's: the collector reads
// them and neither imports Prometheus, so the main module does not depend
// on the client. Give the collector the runner and the scheduler of the
// node's pipeline ([latent.dev/admission/node/pipeline.Pipeline.Runner] and
// [latent.dev/admission/node/pipeline.Pipeline.Scheduler]).
package metrics
