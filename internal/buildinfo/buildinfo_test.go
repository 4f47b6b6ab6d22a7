package buildinfo

import (
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVersion(t *testing.T) {
	require.Equal(t, "v9.9.9", Version("v9.9.9"))
	v := Version("")
	require.NotEmpty(t, v)
	require.True(t, strings.HasSuffix(v, " "+runtime.Version()) || v == "devel", v)
}
