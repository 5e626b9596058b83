package session

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/hermod/hermod/libs/scheduling"
)

// IDProducerType is session-id-producer: a request's session identifier
// from a header or a cookie, which the session_id strategy reads as an
// attribute source ({attribute: <the producer's name>}).
const IDProducerType = "session-id-producer"

func init() {
	scheduling.Register(scheduling.Registration{Type: IDProducerType, New: NewIDProducer})
}

// IDProducerParams are session-id-producer's parameters: exactly one of
// HeaderName and CookieName.
type IDProducerParams struct {
	HeaderName string `json:"headerName,omitempty"`
	CookieName string `json:"cookieName,omitempty"`
}

// IDProducer is session-id-producer.
type IDProducer struct {
	scheduling.Named
	params IDProducerParams
}

// NewIDProducer builds a session-id-producer.
func NewIDProducer(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	var p IDProducerParams
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	if (p.HeaderName == "") == (p.CookieName == "") {
		return nil, scheduling.ParamErrorf("headerName", "set exactly one of headerName and cookieName")
	}
	p.HeaderName = strings.ToLower(p.HeaderName)
	return &IDProducer{Named: scheduling.Named{Type: IDProducerType, Name: name}, params: p}, nil
}

// Parameters implements scheduling.ParameterReporter.
func (p *IDProducer) Parameters() any { return p.params }

// SessionID is req's session identifier ("": none).
func (p *IDProducer) SessionID(req *scheduling.Request) string {
	if p.params.HeaderName != "" {
		return strings.TrimSpace(req.Header(p.params.HeaderName))
	}
	line := req.Header("cookie")
	if line == "" {
		return ""
	}
	cookies, err := http.ParseCookie(line)
	if err != nil {
		return ""
	}
	for _, c := range cookies {
		if c.Name == p.params.CookieName {
			return c.Value
		}
	}
	return ""
}
