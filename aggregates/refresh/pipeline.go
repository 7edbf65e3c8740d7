package refresh

import (
	"bytes"
	"errors"
	"sync/atomic"
)

// batchSize is the size at which COPY data is handed to the worker.
const batchSize = 256 << 10

// pipeline is the io.Writer COPY TO writes into. It copies the data into
// batches that end on line boundaries and hands them to a worker goroutine
// that feeds each line to consume, so that reading from the connection and
// sketching overlap. Write must not be called after close.
type pipeline struct {
	consume func(line []byte) error
	full    chan []byte
	free    chan []byte
	cur     []byte
	done    chan struct{}
	err     atomic.Pointer[error]
	lines   atomic.Int64
}

func newPipeline(consume func([]byte) error) *pipeline {
	p := &pipeline{
		consume: consume,
		full:    make(chan []byte, 2),
		free:    make(chan []byte, 3),
		done:    make(chan struct{}),
	}
	for range 3 {
		p.free <- make([]byte, 0, batchSize+batchSize/4)
	}
	p.cur = <-p.free
	go p.work()
	return p
}

var errStopped = errors.New("refresh: reading stopped after an error")

// Write implements io.Writer; p is only read during the call.
func (p *pipeline) Write(b []byte) (int, error) {
	if e := p.err.Load(); e != nil {
		return 0, errStopped
	}
	p.cur = append(p.cur, b...)
	if len(p.cur) >= batchSize {
		if i := bytes.LastIndexByte(p.cur, '\n'); i >= 0 {
			next := <-p.free
			next = append(next[:0], p.cur[i+1:]...)
			p.full <- p.cur[:i+1]
			p.cur = next
		}
	}
	return len(b), nil
}

// close hands over the rest and waits for the worker; it returns the first
// error of consume, or one for a last line without its newline.
func (p *pipeline) close() error {
	if len(p.cur) > 0 {
		p.full <- p.cur
		p.cur = nil
	}
	close(p.full)
	<-p.done
	if e := p.err.Load(); e != nil {
		return *e
	}
	return nil
}

func (p *pipeline) fail(err error) { p.err.CompareAndSwap(nil, &err) }

func (p *pipeline) work() {
	defer close(p.done)
	for b := range p.full {
		if p.err.Load() == nil {
			rest := b
			for len(rest) > 0 {
				i := bytes.IndexByte(rest, '\n')
				if i < 0 {
					p.fail(errors.New("copy data ends without a newline"))
					break
				}
				if err := p.consume(rest[:i]); err != nil {
					p.fail(err)
					break
				}
				p.lines.Add(1)
				rest = rest[i+1:]
			}
		}
		select {
		case p.free <- b[:0]:
		default:
		}
	}
}
