import { createRequire } from 'node:module';
import type * as OnnxProto from 'onnx-proto';

/**
 * What writing an ONNX graph by hand needs (onnx-proto is CommonJS): the protobuf types and
 * builders for initialisers, graph inputs and outputs, and nodes. Used by the install-time
 * model build and by the tests' tiny transformer.
 */
export function onnxGraph() {
  const { onnx } = createRequire(import.meta.url)('onnx-proto') as typeof OnnxProto;
  // Raw tensor data is little-endian, as are all platforms onnxruntime runs on.
  const tensor = (name: string, dataType: number, dims: number[], data: ArrayBufferView): OnnxProto.onnx.ITensorProto => ({
    name,
    dataType,
    dims,
    rawData: new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
  });
  /** A graph input or output; a string dimension is named (dynamic), a number fixed. */
  const valueInfo = (name: string, elemType: number, dims: (string | number)[]): OnnxProto.onnx.IValueInfoProto => ({
    name,
    type: { tensorType: { elemType, shape: { dim: dims.map((d) => (typeof d === 'string' ? { dimParam: d } : { dimValue: d })) } } },
  });
  /** A node named after its one output. */
  const node = (opType: string, input: string[], output: string, attribute: OnnxProto.onnx.IAttributeProto[] = []): OnnxProto.onnx.INodeProto => ({
    opType,
    input,
    output: [output],
    name: output,
    attribute,
  });
  return { onnx, tensor, valueInfo, node };
}
