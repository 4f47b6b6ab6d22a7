package simnet

import (
	"image/color"

	"gonum.org/v1/plot/plotutil"
)

func plotutilColor(i int) color.Color { return plotutil.Color(i) }
