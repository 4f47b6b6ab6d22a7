// Command runccl runs collectives for real (nccl-tests style) on CPUs or GPUs.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "runccl: the real engine is not built yet (see the open issues)")
	os.Exit(1)
}
