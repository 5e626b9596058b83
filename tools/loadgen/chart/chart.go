// Package chart draws line charts as PNG images: enough for benchmark
// reports (queue length per pod over time), with no dependency beyond
// the standard image packages and a bitmap font.
package chart

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"strconv"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Series is one line: points (X[i], Y[i]) in X order.
type Series struct {
	Name string
	X, Y []float64
	// Points marks every point with a square, for lines of few points.
	Points bool
}

// Chart is a line chart.
type Chart struct {
	Title          string
	XLabel, YLabel string
	Series         []Series
	// Width and Height are the image size in pixels (default 960x480).
	Width, Height int
	// XMax and YMax fix the axes' upper ends (0: from the data), so that
	// charts drawn side by side share scales. Both axes start at 0.
	XMax, YMax float64
	// XStep, when positive, spaces the X ticks (1: whole numbers, for a
	// chart of runs); by default they are round values from the data.
	XStep float64
	// Marks are vertical lines at the given X, labelled (e.g. when the last
	// request finished).
	Marks []Mark
}

// Mark is a labelled vertical line.
type Mark struct {
	X     float64
	Label string
}

// Palette is the series colours, in order (then repeated).
var Palette = []color.RGBA{
	{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255},
	{148, 103, 189, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255},
}

var (
	white = color.RGBA{255, 255, 255, 255}
	black = color.RGBA{0, 0, 0, 255}
	grid  = color.RGBA{225, 225, 225, 255}
	grey  = color.RGBA{90, 90, 90, 255}
)

// layout
const (
	marginLeft   = 64
	marginRight  = 170
	marginTop    = 40
	marginBottom = 48
	lineWidth    = 2
	pointSize    = 3 // half the side of a point's square
)

// WritePNG draws the chart.
func (c *Chart) WritePNG(w io.Writer) error {
	img, err := c.Draw()
	if err != nil {
		return err
	}
	return png.Encode(w, img)
}

// Draw renders the chart.
func (c *Chart) Draw() (*image.RGBA, error) {
	width, height := c.Width, c.Height
	if width == 0 {
		width = 960
	}
	if height == 0 {
		height = 480
	}
	if width < marginLeft+marginRight+50 || height < marginTop+marginBottom+50 {
		return nil, fmt.Errorf("chart: %dx%d is too small", width, height)
	}
	xMax, yMax := c.XMax, c.YMax
	for _, s := range c.Series {
		if len(s.X) != len(s.Y) {
			return nil, errors.New("chart: series " + s.Name + " has different numbers of X and Y values")
		}
		for i := range s.X {
			if c.XMax == 0 {
				xMax = max(xMax, s.X[i])
			}
			if c.YMax == 0 {
				yMax = max(yMax, s.Y[i])
			}
		}
	}
	xTicks, xMax := ticks(xMax)
	if c.XStep > 0 {
		xTicks, xMax = stepTicks(xMax, c.XStep)
	}
	yTicks, yMax := ticks(yMax)
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	draw.Draw(img, img.Bounds(), &image.Uniform{white}, image.Point{}, draw.Src)
	plot := image.Rect(marginLeft, marginTop, width-marginRight, height-marginBottom)
	px := func(x float64) int { return plot.Min.X + int(math.Round(x/xMax*float64(plot.Dx()))) }
	py := func(y float64) int { return plot.Max.Y - int(math.Round(y/yMax*float64(plot.Dy()))) }

	for _, t := range yTicks {
		y := py(t)
		hline(img, plot.Min.X, plot.Max.X, y, grid)
		label := format(t)
		text(img, plot.Min.X-6-textWidth(label), y+4, label, black)
	}
	for _, t := range xTicks {
		x := px(t)
		vline(img, x, plot.Min.Y, plot.Max.Y, grid)
		label := format(t)
		text(img, x-textWidth(label)/2, plot.Max.Y+16, label, black)
	}
	hline(img, plot.Min.X, plot.Max.X, plot.Max.Y, black)
	vline(img, plot.Min.X, plot.Min.Y, plot.Max.Y, black)
	for k, m := range c.Marks {
		if m.X < 0 || m.X > xMax {
			continue
		}
		x := px(m.X)
		for y := plot.Min.Y; y < plot.Max.Y; y += 6 {
			vline(img, x, y, min(y+3, plot.Max.Y), grey)
		}
		// labels one under the other, so that close marks stay readable
		text(img, x+3, plot.Min.Y+12+14*k, m.Label, grey)
	}
	for i, s := range c.Series {
		col := Palette[i%len(Palette)]
		for j := 1; j < len(s.X); j++ {
			line(img, px(s.X[j-1]), py(s.Y[j-1]), px(s.X[j]), py(s.Y[j]), col, plot)
		}
		if len(s.X) == 1 {
			line(img, px(s.X[0]), py(s.Y[0]), px(s.X[0]), py(s.Y[0]), col, plot)
		}
		if s.Points {
			for j := range s.X {
				x, y := px(s.X[j]), py(s.Y[j])
				// squares reach out of the plot: points on the axes show whole
				for d := -pointSize; d <= pointSize; d++ {
					line(img, x-pointSize, y+d, x+pointSize, y+d, col, plot.Inset(-pointSize))
				}
			}
		}
		// legend
		ly := plot.Min.Y + 8 + i*18
		for k := 0; k < lineWidth+1; k++ {
			hline(img, plot.Max.X+14, plot.Max.X+38, ly+k, col)
		}
		text(img, plot.Max.X+44, ly+6, s.Name, black)
	}
	text(img, plot.Min.X, marginTop-22, c.Title, black)
	if c.YLabel != "" {
		text(img, plot.Min.X-textWidth(c.YLabel)/2, marginTop-6, c.YLabel, grey)
	}
	text(img, plot.Min.X+plot.Dx()/2-textWidth(c.XLabel)/2, height-10, c.XLabel, grey)
	return img, nil
}

// ticks returns round tick values from 0 covering v, and the axis end.
func ticks(v float64) ([]float64, float64) {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		v = 1
	}
	raw := v / 6
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	end := math.Ceil(v/step-1e-9) * step
	var out []float64
	for t := 0.0; t <= end+step/2; t += step {
		out = append(out, t)
	}
	return out, end
}

// stepTicks returns ticks step apart from 0 up to v, and the axis end:
// v itself (at least step).
func stepTicks(v, step float64) ([]float64, float64) {
	end := max(step, v)
	var out []float64
	for t := 0.0; t <= end+1e-9; t += step {
		out = append(out, t)
	}
	return out, end
}

func format(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e9 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

var face = basicfont.Face7x13

func textWidth(s string) int { return font.MeasureString(face, s).Ceil() }

func text(img *image.RGBA, x, y int, s string, c color.Color) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: face, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func hline(img *image.RGBA, x0, x1, y int, c color.RGBA) {
	for x := x0; x <= x1; x++ {
		img.SetRGBA(x, y, c)
	}
}

func vline(img *image.RGBA, x, y0, y1 int, c color.RGBA) {
	for y := y0; y <= y1; y++ {
		img.SetRGBA(x, y, c)
	}
}

// line draws a line lineWidth pixels thick (Bresenham with a square
// brush), clipped to clip.
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA, clip image.Rectangle) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		for i := 0; i < lineWidth; i++ {
			for j := 0; j < lineWidth; j++ {
				if p := image.Pt(x0+i, y0-j); p.In(clip.Inset(-1)) {
					img.SetRGBA(p.X, p.Y, c)
				}
			}
		}
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}
