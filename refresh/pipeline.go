package refresh

import (
	"errors"
	"sync/atomic"
)

// batchSize is the size at which COPY data is handed to the worker.
const batchSize = 256 << 10

// pipeline is the io.Writer COPY TO writes into. It copies the data into
// batches and hands them to a worker goroutine that feeds them to consume,
// so that reading from the connection and sketching overlap. consume
// returns how many bytes it used; the worker keeps the rest (a tuple cut by
// the batch boundary) for the next batch. Write must not be called after
// close.
type pipeline struct {
	consume func(data []byte) (int, error)
	full    chan []byte
	free    chan []byte
	cur     []byte
	done    chan struct{}
	err     atomic.Pointer[error]
	bytes   atomic.Int64
}

func newPipeline(consume func([]byte) (int, error)) *pipeline {
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

// Write implements io.Writer; b is only read during the call.
func (p *pipeline) Write(b []byte) (int, error) {
	if e := p.err.Load(); e != nil {
		return 0, errStopped
	}
	p.cur = append(p.cur, b...)
	if len(p.cur) >= batchSize {
		p.full <- p.cur
		p.cur = (<-p.free)[:0]
	}
	return len(b), nil
}

// close hands over the rest and waits for the worker; it returns the first
// error of consume, or one for data left unused at the end.
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
	var rest []byte // unused bytes of the previous batch
	for b := range p.full {
		if p.err.Load() == nil {
			data := b
			if len(rest) > 0 {
				rest = append(rest, b...)
				data = rest
			}
			n, err := p.consume(data)
			p.bytes.Add(int64(len(b)))
			if err != nil {
				p.fail(err)
			}
			rest = append(rest[:0:0], data[n:]...)
		}
		select {
		case p.free <- b[:0]:
		default:
		}
	}
	if len(rest) > 0 && p.err.Load() == nil {
		p.fail(errors.New("copy data ends inside a tuple"))
	}
}
