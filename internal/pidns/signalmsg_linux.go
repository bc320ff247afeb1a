package pidns

import "syscall"

// maxSignals bounds the signals of one signal request.
const maxSignals = 4

// encodeSignal encodes a signal request: id, then the signals the init sends in turn to every other
// process of its namespace.
func encodeSignal(id uint64, sigs []syscall.Signal) ([]byte, error) {
	if len(sigs) == 0 || len(sigs) > maxSignals {
		return nil, protocolErr(itoa(len(sigs)) + " signals in a request (1 to " + itoa(maxSignals) + ")")
	}
	var e encoder
	e.U64(id)
	e.U32(uint32(len(sigs)))
	for _, s := range sigs {
		if s <= 0 || s > 64 {
			return nil, protocolErr("signal " + itoa(int(s)))
		}
		e.U32(uint32(s))
	}
	return e.Bytes(), nil
}

// decodeSignal decodes a signal request.
func decodeSignal(payload []byte) (id uint64, sigs []syscall.Signal, err error) {
	d := newDecoder(payload)
	id = d.U64("id")
	n := d.U32("signals")
	if d.Err() == nil && (n == 0 || n > maxSignals) {
		return 0, nil, protocolErr(itoa(n) + " signals in a request")
	}
	for range n {
		s := d.U32("signal")
		if d.Err() == nil && (s == 0 || s > 64) {
			return 0, nil, protocolErr("signal " + itoa(s))
		}
		sigs = append(sigs, syscall.Signal(s))
	}
	if err := d.End("signal request"); err != nil {
		return 0, nil, err
	}
	return id, sigs, nil
}
