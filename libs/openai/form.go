package openai

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"strings"
)

// ParseRequest is Parse for a body of the given content type: a body to
// APIPassthrough that is a form names its model in its "model" field.
func ParseRequest(api API, contentType string, body []byte) (Request, error) {
	r, err := Parse(api, body)
	if err == nil && api == APIPassthrough && r.Model == "" {
		r.Model = FormModel(contentType, body)
	}
	return r, err
}

// maxFormModel bounds the model name a form is read for.
const maxFormModel = 1 << 10

// FormModel returns the model a multipart/form-data body names in its
// "model" field (as OpenAI's audio endpoints take it), "" when the body is
// not such a form or names none. It reads the parts up to that field
// only, never a file part's content into memory.
func FormModel(contentType string, body []byte) string {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return ""
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for {
		p, err := mr.NextPart()
		if err != nil {
			return ""
		}
		if p.FormName() != "model" || p.FileName() != "" {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(p, maxFormModel+1))
		if (err != nil && !errors.Is(err, io.EOF)) || len(b) > maxFormModel {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
}
