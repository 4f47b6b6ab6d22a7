// Package partial completes topology files that leave part of the machine to NCCL's hardware
// detection. Cloud providers ship such files for their VMs (Azure's ND-series topologies, the
// AWS files of aws-ofi-nccl): the PCI tree and the NUMA nodes are there, but the GPUs are bare
// <pci> devices, because NCCL, given the file as NCCL_TOPO_FILE, fills each GPU's <gpu> element
// (sm, NVLinks, rank, GDR) from NVML and each NIC from its network plugin. Without the live
// machine simccl cannot detect anything; naming the GPU model lets it fill what detection would
// have written on that hardware.
//
//	gaps := partial.Inspect(doc)          // what the file leaves to detection
//	if gaps.NeedsModel() { fmt.Println(gaps.Describe(doc)) }
//	done, res, err := partial.Complete(doc, "h100")
//	for _, l := range res.Left { ... }    // what a GPU model cannot give (NICs)
//
// Models lists the GPUs it knows, each with its compute capability, its NVLinks per GPU and
// what they reach, and the datasheet or NCCL dump those come from. Completion fills only what is
// missing, as NCCL does (xmlSetAttrIfUnset), and refuses, naming what is still missing, what a
// GPU model cannot say: which devices are GPUs when the file gives no PCI class, and the
// GPU-to-GPU wiring of an NVLink mesh. NICs are left as the file has them by Complete;
// CompleteNICs fills the NIC devices such files list bare, given the speed NCCL's network plugin
// would report for their ports (a GPU model does not say it), which a multi-node run needs:
//
//	done, nics, err := partial.CompleteNICs(done, partial.NIC{Speed: 400000, GDR: true})
package partial
