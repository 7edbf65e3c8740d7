package main

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"strings"
)

// The plot has two panels sharing a log-scale n axis: RSE / (1.04/√m) on
// top, bias in percent below. Our estimator is drawn solid, the classic one
// dashed, one colour per log2m; targets are dotted black lines.

const (
	plotW      = 1200
	plotH      = 990
	marginL    = 110
	marginR    = 50
	panelTop1  = 90
	panelH     = 330
	panelGap   = 110
	textScale  = 2
	glyphW     = 5
	glyphH     = 7
	glyphSpace = 1
)

var (
	white     = color.RGBA{255, 255, 255, 255}
	black     = color.RGBA{0, 0, 0, 255}
	gridGrey  = color.RGBA{225, 225, 225, 255}
	axisGrey  = color.RGBA{90, 90, 90, 255}
	lineColor = []color.RGBA{{31, 119, 180, 255}, {44, 160, 44, 255}, {214, 39, 40, 255}}
)

type panel struct {
	x0, y0, x1, y1 int     // pixel box
	xmin, xmax     float64 // log10 n
	ymin, ymax     float64
}

func (p panel) px(x, y float64) (float64, float64) {
	fx := float64(p.x0) + (x-p.xmin)/(p.xmax-p.xmin)*float64(p.x1-p.x0)
	fy := float64(p.y1) - (y-p.ymin)/(p.ymax-p.ymin)*float64(p.y1-p.y0)
	return fx, fy
}

type canvas struct{ img *image.RGBA }

func (c canvas) set(x, y int, col color.RGBA) {
	if image.Pt(x, y).In(c.img.Rect) {
		c.img.SetRGBA(x, y, col)
	}
}

func (c canvas) rect(x0, y0, x1, y1 int, col color.RGBA) {
	for y := y0; y < y1; y++ {
		for x := x0; x < x1; x++ {
			c.set(x, y, col)
		}
	}
}

// line draws from (x0,y0) to (x1,y1) with a square pen of the given width;
// dash > 0 draws dash pixels on, dash pixels off. phase carries the dash
// position between segments of one polyline.
func (c canvas) line(x0, y0, x1, y1 float64, width int, col color.RGBA, dash int, phase *float64) {
	dx, dy := x1-x0, y1-y0
	steps := int(math.Max(math.Abs(dx), math.Abs(dy))) + 1
	seg := math.Hypot(dx, dy) / float64(steps)
	for i := 0; i <= steps; i++ {
		t := float64(i) / float64(steps)
		if dash > 0 && phase != nil {
			on := int(*phase/float64(dash))%2 == 0
			*phase += seg
			if !on {
				continue
			}
		}
		x := int(math.Round(x0 + t*dx))
		y := int(math.Round(y0 + t*dy))
		c.rect(x-width/2, y-width/2, x-width/2+width, y-width/2+width, col)
	}
}

// text draws s with the embedded 5x7 font, scaled; (x, y) is the top left.
func (c canvas) text(x, y int, s string, col color.RGBA, scale int) {
	for _, r := range strings.ToUpper(s) {
		g, ok := font[r]
		if !ok {
			g = font['?']
		}
		for row, bits := range g {
			for colIdx, b := range bits {
				if b == '#' {
					c.rect(x+colIdx*scale, y+row*scale, x+(colIdx+1)*scale, y+(row+1)*scale, col)
				}
			}
		}
		x += (glyphW + glyphSpace) * scale
	}
}

func textWidth(s string, scale int) int {
	return len([]rune(s)) * (glyphW + glyphSpace) * scale
}

func (c canvas) frame(p panel, yTicks []float64, yLabel func(float64) string, title string) {
	c.rect(p.x0, p.y0, p.x1, p.y1, white)
	for d := int(p.xmin); d <= int(p.xmax); d++ {
		x, _ := p.px(float64(d), 0)
		c.line(x, float64(p.y0), x, float64(p.y1), 1, gridGrey, 0, nil)
		label := decadeLabel(d)
		c.text(int(x)-textWidth(label, textScale)/2, p.y1+8, label, axisGrey, textScale)
	}
	for _, v := range yTicks {
		_, y := p.px(p.xmin, v)
		c.line(float64(p.x0), y, float64(p.x1), y, 1, gridGrey, 0, nil)
		label := yLabel(v)
		c.text(p.x0-10-textWidth(label, textScale), int(y)-glyphH*textScale/2, label, axisGrey, textScale)
	}
	c.line(float64(p.x0), float64(p.y0), float64(p.x0), float64(p.y1), 2, axisGrey, 0, nil)
	c.line(float64(p.x0), float64(p.y1), float64(p.x1), float64(p.y1), 2, axisGrey, 0, nil)
	c.text(p.x0, p.y0-28, title, black, textScale)
}

func decadeLabel(d int) string {
	return [...]string{"1", "10", "100", "1K", "10K", "100K", "1M", "10M", "100M", "1G"}[min(d, 9)]
}

// series draws y(n) for the checkpoints where the sketch uses registers,
// clamped to the panel.
func (c canvas) series(p panel, ns []int, explicit []bool, y func(k int) float64, col color.RGBA, width, dash int) {
	var phase float64
	havePrev := false
	var px0, py0 float64
	for k, n := range ns {
		if explicit[k] {
			havePrev = false
			continue
		}
		v := math.Max(p.ymin, math.Min(p.ymax, y(k)))
		x, yy := p.px(math.Log10(float64(n)), v)
		if havePrev {
			c.line(px0, py0, x, yy, width, col, dash, &phase)
		}
		px0, py0, havePrev = x, yy, true
	}
}

func (c canvas) hline(p panel, v float64, col color.RGBA, label string) {
	_, y := p.px(p.xmin, v)
	var phase float64
	c.line(float64(p.x0), y, float64(p.x1), y, 2, col, 6, &phase)
	if label != "" {
		c.text(p.x1-textWidth(label, textScale)-6, int(y)-glyphH*textScale-4, label, col, textScale)
	}
}

func writePlot(path string, results []*result) error {
	img := image.NewRGBA(image.Rect(0, 0, plotW, plotH))
	c := canvas{img}
	c.rect(0, 0, plotW, plotH, white)
	maxN := 1
	for _, r := range results {
		maxN = max(maxN, r.ns[len(r.ns)-1])
	}
	xmax := math.Ceil(math.Log10(float64(maxN)))

	c.text(marginL, 16, "HLL ESTIMATOR ACCURACY, REGWIDTH 5: OURS (ERTL, SOLID) VS EXTENSION CLASSIC (DASHED)", black, textScale)

	top := panel{x0: marginL, y0: panelTop1, x1: plotW - marginR, y1: panelTop1 + panelH, xmin: 0, xmax: xmax, ymin: 0, ymax: 1.6}
	c.frame(top, []float64{0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6},
		func(v float64) string { return fmt.Sprintf("%.1f", v) },
		"RSE / (1.04/SQRT(M))   (CLIPPED AT 1.6; EXPLICIT RANGE IS EXACT AND NOT DRAWN)")
	c.hline(top, rseFactor, black, fmt.Sprintf("TARGET %.2f", rseFactor))
	c.hline(top, 1.0, axisGrey, "")

	y0 := panelTop1 + panelH + panelGap
	bot := panel{x0: marginL, y0: y0, x1: plotW - marginR, y1: y0 + panelH, xmin: 0, xmax: xmax, ymin: -1.5, ymax: 1.5}
	c.frame(bot, []float64{-1.5, -1, -0.5, 0, 0.5, 1, 1.5},
		func(v float64) string { return fmt.Sprintf("%+.1f%%", v) },
		"BIAS IN %   (CLIPPED AT +-1.5%)")
	c.hline(bot, 0.5, black, "LOG2M 10 TARGET")
	c.hline(bot, -0.5, black, "")
	c.hline(bot, 0.25, axisGrey, "LOG2M 12, 14")
	c.hline(bot, -0.25, axisGrey, "")
	c.hline(bot, 0, axisGrey, "")

	for i, r := range results {
		col := lineColor[i%len(lineColor)]
		se := r.stdErr()
		c.series(top, r.ns, r.explicit, func(k int) float64 { return r.stats[k].classicRSE / se }, col, 2, 7)
		c.series(top, r.ns, r.explicit, func(k int) float64 { return r.stats[k].oursRSE / se }, col, 3, 0)
		c.series(bot, r.ns, r.explicit, func(k int) float64 { return 100 * r.stats[k].classicBias }, col, 2, 7)
		c.series(bot, r.ns, r.explicit, func(k int) float64 { return 100 * r.stats[k].oursBias }, col, 3, 0)
	}

	// Axis title under the lower panel, legend at the bottom.
	xt := "N (DISTINCT VALUES), LOG SCALE"
	c.text((bot.x0+bot.x1)/2-textWidth(xt, textScale)/2, bot.y1+36, xt, axisGrey, textScale)
	ly := plotH - 36
	lx := 40
	for i, r := range results {
		col := lineColor[i%len(lineColor)]
		var phase float64
		c.line(float64(lx), float64(ly+7), float64(lx+40), float64(ly+7), 3, col, 0, nil)
		c.line(float64(lx+46), float64(ly+7), float64(lx+86), float64(ly+7), 2, col, 7, &phase)
		label := fmt.Sprintf("LOG2M %d, %d TRIALS", r.cfg.log2m, r.cfg.trials)
		c.text(lx+96, ly, label, black, textScale)
		lx += 96 + textWidth(label, textScale) + 24
	}

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// font is a 5x7 bitmap font for the characters the plot uses.
var font = map[rune][7]string{
	' ': {".....", ".....", ".....", ".....", ".....", ".....", "....."},
	'0': {".###.", "#...#", "#..##", "#.#.#", "##..#", "#...#", ".###."},
	'1': {"..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###."},
	'2': {".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"},
	'3': {"#####", "...#.", "..#..", "...#.", "....#", "#...#", ".###."},
	'4': {"...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."},
	'5': {"#####", "#....", "####.", "....#", "....#", "#...#", ".###."},
	'6': {"..##.", ".#...", "#....", "####.", "#...#", "#...#", ".###."},
	'7': {"#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."},
	'8': {".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###."},
	'9': {".###.", "#...#", "#...#", ".####", "....#", "...#.", ".##.."},
	'A': {".###.", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"},
	'B': {"####.", "#...#", "#...#", "####.", "#...#", "#...#", "####."},
	'C': {".###.", "#...#", "#....", "#....", "#....", "#...#", ".###."},
	'D': {"###..", "#..#.", "#...#", "#...#", "#...#", "#..#.", "###.."},
	'E': {"#####", "#....", "#....", "####.", "#....", "#....", "#####"},
	'F': {"#####", "#....", "#....", "####.", "#....", "#....", "#...."},
	'G': {".###.", "#...#", "#....", "#.###", "#...#", "#...#", ".####"},
	'H': {"#...#", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"},
	'I': {".###.", "..#..", "..#..", "..#..", "..#..", "..#..", ".###."},
	'J': {"..###", "...#.", "...#.", "...#.", "...#.", "#..#.", ".##.."},
	'K': {"#...#", "#..#.", "#.#..", "##...", "#.#..", "#..#.", "#...#"},
	'L': {"#....", "#....", "#....", "#....", "#....", "#....", "#####"},
	'M': {"#...#", "##.##", "#.#.#", "#.#.#", "#...#", "#...#", "#...#"},
	'N': {"#...#", "#...#", "##..#", "#.#.#", "#..##", "#...#", "#...#"},
	'O': {".###.", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."},
	'P': {"####.", "#...#", "#...#", "####.", "#....", "#....", "#...."},
	'Q': {".###.", "#...#", "#...#", "#...#", "#.#.#", "#..#.", ".##.#"},
	'R': {"####.", "#...#", "#...#", "####.", "#.#..", "#..#.", "#...#"},
	'S': {".####", "#....", "#....", ".###.", "....#", "....#", "####."},
	'T': {"#####", "..#..", "..#..", "..#..", "..#..", "..#..", "..#.."},
	'U': {"#...#", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."},
	'V': {"#...#", "#...#", "#...#", "#...#", "#...#", ".#.#.", "..#.."},
	'W': {"#...#", "#...#", "#...#", "#.#.#", "#.#.#", "#.#.#", ".#.#."},
	'X': {"#...#", "#...#", ".#.#.", "..#..", ".#.#.", "#...#", "#...#"},
	'Y': {"#...#", "#...#", ".#.#.", "..#..", "..#..", "..#..", "..#.."},
	'Z': {"#####", "....#", "...#.", "..#..", ".#...", "#....", "#####"},
	'.': {".....", ".....", ".....", ".....", ".....", ".##..", ".##.."},
	',': {".....", ".....", ".....", ".....", ".##..", "..#..", ".#..."},
	':': {".....", ".##..", ".##..", ".....", ".##..", ".##..", "....."},
	';': {".....", ".##..", ".##..", ".....", ".##..", "..#..", ".#..."},
	'%': {"##...", "##..#", "...#.", "..#..", ".#...", "#..##", "...##"},
	'(': {"...#.", "..#..", ".#...", ".#...", ".#...", "..#..", "...#."},
	')': {".#...", "..#..", "...#.", "...#.", "...#.", "..#..", ".#..."},
	'/': {".....", "....#", "...#.", "..#..", ".#...", "#....", "....."},
	'-': {".....", ".....", ".....", "#####", ".....", ".....", "....."},
	'+': {".....", "..#..", "..#..", "#####", "..#..", "..#..", "....."},
	'=': {".....", ".....", "#####", ".....", "#####", ".....", "....."},
	'?': {".###.", "#...#", "....#", "...#.", "..#..", ".....", "..#.."},
}
