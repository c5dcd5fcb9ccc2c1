package udpsink_test

import (
	"errors"
	"fmt"

	"github.com/gosdma/gosdma/sdma/udpsink"
)

// A frame is a header and the packet's bytes: PutHeader writes the header a receiver decodes
// with ParseHeader, and the header's CRC is Checksum of the payload, which the receiver
// recomputes. ParseHeader checks the length and the magic only.
func ExamplePutHeader() {
	payload := [][]byte{[]byte("hello, "), []byte("world")}
	frame := make([]byte, udpsink.HeaderLen, udpsink.HeaderLen+12)
	udpsink.PutHeader(frame, udpsink.Header{Engine: 3, Seq: 41, CRC: udpsink.Checksum(payload)})
	for _, p := range payload {
		frame = append(frame, p...)
	}

	h, err := udpsink.ParseHeader(frame)
	if err != nil {
		panic(err)
	}
	body := frame[udpsink.HeaderLen:]
	fmt.Println(h.Engine, h.Seq, h.Flags, string(body), h.CRC == udpsink.Checksum([][]byte{body}))

	_, err = udpsink.ParseHeader(frame[:udpsink.HeaderLen-1])
	fmt.Println(errors.Is(err, udpsink.ErrBadFrame))
	frame[0] ^= 0xff // not the magic
	_, err = udpsink.ParseHeader(frame)
	fmt.Println(errors.Is(err, udpsink.ErrBadFrame))
	// Output:
	// 3 41 0 hello, world true
	// true
	// true
}
