package latentd

import (
	"fmt"

	"latent.dev/admission/edge/guest"
	"latent.dev/admission/policy"
)

// checkCallStacks refuses a node whose memory cannot hold a guest's
// worst-case call stack and instance, and the guest memory kept for the
// next guest (guest.PerCellHostBytes, which no grant sees), on every cell
// at once: the cell classes' parallelism added
// up.
func checkCallStacks(p *policy.NodeAdmissionPolicy) error {
	var cells uint64
	for _, c := range p.CellClasses {
		cells += c.Parallelism
	}
	available := guest.HostMemoryBytes()
	if err := guest.CheckCallStacks(cells, available); err != nil {
		return fmt.Errorf("latentd: %d cells need %d MiB each for guests' call stacks, instances and kept memories, more than the %d MiB this process may use: %w",
			cells, guest.PerCellHostBytes>>20, available>>20, err)
	}
	return nil
}
