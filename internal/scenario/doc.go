// Package scenario decodes and runs scenario files (docs/scenarios.md): a
// node policy, a catalog and a list of steps that drive the real library
// through its public entry points (Admit, EnsureSchedulableAt,
// StartExecution) on a virtual clock that reads each step's time.
//
// # Decoding
//
// [Decode] is strict like the policy and catalog decoders: unknown keys,
// missing keys, wrong types and malformed steps are reported together,
// each with its JSON path (`steps[3].request.budget.cpu_fuel: missing`).
// A step's at_ms may be omitted (same time as the previous step) and never
// goes backwards.
//
// # Running
//
// [Scenario.Run] builds one provider (one ledger) and one catalog from the
// file, deploys the catalog's deployments in file order (generations 1,
// 2, ...), takes the pin "initial", then runs each step at epoch + at_ms.
// An admit step resolves its target with its routing key through the
// named pin (default: the newest), applies any tamper, and admits through
// a controller bound to that pin, exactly as an adapter would. A target
// that does not resolve answers revision-not-available.
//
// # Checking
//
// [Compare] treats expect as a partial answer: every key it names must
// equal the answer's value (numbers exactly, objects key by key); other
// keys are not compared.
package scenario
