"""What a person looks at: the roofline chart's geometry and the node's view built from verdicts.

No web or terminal code here (tests/test_layers.py): `GET /roofline.svg` and `/` serve what this
package draws, and `ridgeline top` prints it as text.
"""
