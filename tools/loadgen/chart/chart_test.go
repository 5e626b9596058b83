package chart

import (
	"bytes"
	"image/png"
	"testing"
)

func TestDrawsSeriesInTheirColours(t *testing.T) {
	c := &Chart{
		Title: "queue", XLabel: "time (s)", YLabel: "waiting",
		Series: []Series{
			{Name: "pod-0", X: []float64{0, 50, 100}, Y: []float64{0, 40, 0}},
			{Name: "pod-1", X: []float64{0, 100}, Y: []float64{10, 10}},
		},
		Marks: []Mark{{X: 90, Label: "done"}},
	}
	var buf bytes.Buffer
	if err := c.WritePNG(&buf); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 960 || b.Dy() != 480 {
		t.Fatalf("size %v", b)
	}
	count := func(want int) int {
		n := 0
		col := Palette[want]
		b := img.Bounds()
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				r, g, bl, _ := img.At(x, y).RGBA()
				if uint8(r>>8) == col.R && uint8(g>>8) == col.G && uint8(bl>>8) == col.B {
					n++
				}
			}
		}
		return n
	}
	// pod-0 climbs to the top of the plot and back: a long line; pod-1 is
	// a flat line across the plot
	plotWidth := 960 - marginLeft - marginRight
	if n := count(0); n < plotWidth {
		t.Fatalf("pod-0 drew %d pixels", n)
	}
	if n := count(1); n < plotWidth || n > 4*plotWidth {
		t.Fatalf("pod-1 drew %d pixels", n)
	}
	// the flat line sits at y=10 of an axis ending at 40
	y := 480 - marginBottom - (480-marginTop-marginBottom)*10/40
	r, g, b, _ := img.At(marginLeft+plotWidth/2, y).RGBA()
	if c := Palette[1]; uint8(r>>8) != c.R || uint8(g>>8) != c.G || uint8(b>>8) != c.B {
		t.Fatalf("pixel on pod-1's line is %d,%d,%d", r>>8, g>>8, b>>8)
	}
}

func TestTicksAreRound(t *testing.T) {
	for _, c := range []struct {
		v       float64
		end     float64
		n       int
		between float64
	}{
		{0, 1, 6, 0.2}, {37, 40, 5, 10}, {612.5, 800, 5, 200}, {1, 1, 6, 0.2},
	} {
		ts, end := ticks(c.v)
		if end != c.end || len(ts) != c.n || ts[1]-ts[0] != c.between {
			t.Errorf("ticks(%v) = %v end %v", c.v, ts, end)
		}
	}
}

func TestStepTicks(t *testing.T) {
	for _, c := range []struct {
		v, step, end float64
		n            int
	}{
		{0, 1, 1, 2}, {1, 1, 1, 2}, {4, 1, 4, 5}, {4.25, 1, 4.25, 5}, {7, 2, 7, 4},
	} {
		ts, end := stepTicks(c.v, c.step)
		if end != c.end || len(ts) != c.n || ts[1]-ts[0] != c.step {
			t.Errorf("stepTicks(%v, %v) = %v end %v", c.v, c.step, ts, end)
		}
	}
}

func TestRejectsBadSeries(t *testing.T) {
	c := &Chart{Series: []Series{{Name: "x", X: []float64{1}, Y: nil}}}
	if _, err := c.Draw(); err == nil {
		t.Fatal("mismatched series drawn")
	}
	c = &Chart{Width: 100, Height: 100}
	if _, err := c.Draw(); err == nil {
		t.Fatal("too small chart drawn")
	}
}

func TestPointsAreMarked(t *testing.T) {
	c := &Chart{Series: []Series{{Name: "policy", X: []float64{0, 2, 4}, Y: []float64{10, 20, 10}, Points: true}}, XMax: 4, YMax: 40}
	img, err := c.Draw()
	if err != nil {
		t.Fatal(err)
	}
	// the middle point's square: its corner is off the line
	plotWidth, plotHeight := 960-marginLeft-marginRight, 480-marginTop-marginBottom
	x, y := marginLeft+plotWidth/2, 480-marginBottom-plotHeight/2
	if got := img.RGBAAt(x+pointSize, y+pointSize); got != Palette[0] {
		t.Fatalf("corner of the middle point is %v", got)
	}
	c.Series[0].Points = false
	if img, err = c.Draw(); err != nil {
		t.Fatal(err)
	}
	if got := img.RGBAAt(x+pointSize, y+pointSize); got == Palette[0] {
		t.Fatal("a point is marked without Points")
	}
}
