"""Export and interop: weights as safetensors with PyTorch's names, models as ONNX graphs.

Needs the ``export`` extra (``pip install 'nnjit[export]'``: onnx, onnxruntime, safetensors),
imported only when one of these functions is called. The usual entry points are the methods
:meth:`nnjit.nn.Module.save_safetensors`, :meth:`~nnjit.nn.Module.load_safetensors` and
:meth:`~nnjit.nn.Module.save_onnx`.
"""

from nnjit.export.onnx_export import ONNX_OPSET as ONNX_OPSET
from nnjit.export.onnx_export import save_onnx as save_onnx
from nnjit.export.safetensors_io import SafetensorsFileError as SafetensorsFileError
from nnjit.export.safetensors_io import SafetensorsMismatchError as SafetensorsMismatchError
from nnjit.export.safetensors_io import load_safetensors as load_safetensors
from nnjit.export.safetensors_io import save_safetensors as save_safetensors
