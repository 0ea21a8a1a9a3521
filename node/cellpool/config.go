package cellpool

import (
	"time"

	"latent.dev/admission/policy"
)

// MaxCellsPerClass bounds a class's parallelism, so that a typo in a policy
// file cannot make New allocate without limit. It is the bound policy
// validation enforces, so a valid policy always yields a pool.
const MaxCellsPerClass = policy.MaxCellParallelism

// Config is the pool's startup configuration. It must agree with the
// admission policy it serves; [ConfigFromPolicy] derives one that does.
type Config struct {
	// Parallelism is the number of cells per class; zero leaves the
	// class unpooled.
	Parallelism [policy.NumCellClasses]uint64
	// EstimatedServiceTime is the admission policy's estimate of one
	// activation's service time, used for the conservative queue delay of
	// a degraded class.
	EstimatedServiceTime time.Duration
	// MaxBacklog is the largest live backlog a class can have (the node's
	// live-activation limit).
	MaxBacklog uint64
	// StopDelay is a queue delay that no admission can meet: the node's
	// wall-time ceiling. A class with no usable cell publishes it, which
	// stops admission of that class.
	StopDelay time.Duration
}

// ConfigFromPolicy derives the pool configuration that agrees with a
// compiled admission policy: each configured cell class gets exactly its
// configured parallelism.
func ConfigFromPolicy(c *policy.Compiled) Config {
	node := c.Node()
	cfg := Config{
		EstimatedServiceTime: node.Deadline.EstimatedServiceTime,
		MaxBacklog:           node.Limits.MaxLiveActivations,
		StopDelay:            node.BudgetCeiling.WallTime,
	}
	for class := range policy.NumCellClasses {
		if s := c.CellClass(policy.CellClass(class)); s.Configured {
			cfg.Parallelism[class] = s.Parallelism
		}
	}
	return cfg
}

// conservativeDelay is the queue delay a class with usable of its
// configured cells must publish so that admission, which divides the
// backlog by the configured parallelism, never promises more than the
// usable cells can deliver: the wait behind the largest possible backlog
// on the usable cells. It is zero when pool and configuration agree and
// StopDelay when no cell is usable or the product does not fit.
func (c *Config) conservativeDelay(usable, configured uint64) time.Duration {
	switch {
	case usable >= configured:
		return 0
	case usable == 0:
		return c.StopDelay
	}
	waves := c.MaxBacklog / usable
	if c.EstimatedServiceTime > 0 && waves > uint64(c.StopDelay/c.EstimatedServiceTime) {
		return c.StopDelay
	}
	return time.Duration(waves) * c.EstimatedServiceTime
}
