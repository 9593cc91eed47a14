package cli

import (
	"os"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"
)

// bar is a progress bar on stderr when stderr is a terminal, else nothing:
// scripts and pipes get clean output.
type bar struct {
	p *mpb.Progress
	b *mpb.Bar
}

func (e *env) progress(name string, total int64) *bar {
	f, ok := e.stderr.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) || total == 0 {
		return &bar{}
	}
	p := mpb.New(mpb.WithOutput(f), mpb.WithWidth(40))
	b := p.AddBar(total,
		mpb.PrependDecorators(decor.Name(name+" "), decor.CountersKibiByte("% .1f / % .1f")),
		mpb.AppendDecorators(decor.AverageSpeed(decor.SizeB1024(0), " % .1f"), decor.Name(" "), decor.AverageETA(decor.ET_STYLE_GO)))
	return &bar{p: p, b: b}
}

func (b *bar) add(n int64) {
	if b.b != nil {
		b.b.IncrInt64(n)
	}
}

func (b *bar) done(err error) {
	if b.b == nil {
		return
	}
	if err != nil {
		b.b.Abort(false)
	}
	b.p.Wait()
}
