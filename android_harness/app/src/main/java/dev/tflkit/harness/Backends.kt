package dev.tflkit.harness

import android.os.SystemClock
import com.google.ai.edge.litert.Accelerator
import com.google.ai.edge.litert.CompiledModel
import com.google.ai.edge.litert.TensorBuffer
import dev.tflkit.protocol.DType
import dev.tflkit.protocol.Job
import dev.tflkit.protocol.ResultWriter
import dev.tflkit.protocol.Tensor
import java.nio.ByteBuffer
import java.nio.ByteOrder
import org.tensorflow.lite.Interpreter
import org.tensorflow.lite.gpu.GpuDelegate
import org.tensorflow.lite.gpu.GpuDelegateFactory

/** One output or input of the entry point: name, dtype, shape (from the classic Interpreter). */
data class Port(val name: String, val dtype: DType, val shape: LongArray)

/**
 * The four backends of the protocol:
 * - `cpu`: the classic Interpreter (XNNPACK), reads every dtype;
 * - `gpu_delegate`: the classic Interpreter with the GpuDelegate (precision loss allowed, as the
 *   Java API's default);
 * - `gpu_fp16` / `gpu_fp32`: CompiledModel with the GPU accelerator (and the CPU for what the
 *   GPU rejects), fp16 or fp32 precision.
 */
object Backends {
    fun run(job: Job, record: ResultWriter.Backend, stage: (String) -> Unit) {
        val log = DelegateLog.start()
        val start = SystemClock.elapsedRealtimeNanos()
        if (record.name != "cpu") {
            record.gpu = DeviceInfo.glStrings()
        }
        try {
            when (record.name) {
                "cpu" -> interpreter(job, record, stage, gpu = false)
                "gpu_delegate" -> interpreter(job, record, stage, gpu = true)
                "gpu_fp16", "gpu_fp32" -> compiled(job, record, stage, fp32 = record.name == "gpu_fp32")
                else -> throw IllegalArgumentException("unknown backend ${record.name}")
            }
        } catch (e: Throwable) {
            if (record.status == null || record.status == "ok") {
                record.status = if (record.compileSeconds == null) "compile_error" else "run_error"
            }
            record.error = oneLine(e)
            record.dropOutputs()
        }
        record.delegateLog = log.text()
        DelegateLog.countsInto(record)
        record.wallSeconds = (SystemClock.elapsedRealtimeNanos() - start) / 1e9
    }

    private fun seconds(from: Long) = (SystemClock.elapsedRealtimeNanos() - from) / 1e9

    private fun dtypeOf(t: org.tensorflow.lite.Tensor): DType = DType.fromName(t.dataType().name.lowercase())

    /** Entry point ports: the job's signature (or the first), else the graph inputs/outputs. */
    private fun ports(interpreter: Interpreter, key: String?): Pair<List<Port>, List<Port>> {
        val keys = interpreter.signatureKeys
        if (keys.isEmpty()) {
            val ins = (0 until interpreter.inputTensorCount).map { interpreter.getInputTensor(it) }
            val outs = (0 until interpreter.outputTensorCount).map { interpreter.getOutputTensor(it) }
            return ins.map { Port(it.name(), dtypeOf(it), it.shape().map(Int::toLong).toLongArray()) } to
                outs.map { Port(it.name(), dtypeOf(it), it.shape().map(Int::toLong).toLongArray()) }
        }
        val sig = key ?: keys[0]
        require(sig in keys) { "no signature '$sig'; the model has ${keys.toList()}" }
        val ins = interpreter.getSignatureInputs(sig).map {
            val t = interpreter.getInputTensorFromSignature(it, sig)
            Port(it, dtypeOf(t), t.shape().map(Int::toLong).toLongArray())
        }
        val outs = interpreter.getSignatureOutputs(sig).map {
            val t = interpreter.getOutputTensorFromSignature(it, sig)
            Port(it, dtypeOf(t), t.shape().map(Int::toLong).toLongArray())
        }
        return ins to outs
    }

    private fun direct(bytes: ByteArray): ByteBuffer =
        ByteBuffer.allocateDirect(bytes.size).order(ByteOrder.nativeOrder()).put(bytes).also { it.rewind() }

    private fun interpreter(job: Job, record: ResultWriter.Backend, stage: (String) -> Unit, gpu: Boolean) {
        stage("compile")
        val options = Interpreter.Options()
        job.threads?.let { options.setNumThreads(it) }
        var delegate: GpuDelegate? = null
        if (gpu) {
            delegate = GpuDelegate(GpuDelegateFactory.Options().setPrecisionLossAllowed(true))
            options.addDelegate(delegate)
        }
        val start = SystemClock.elapsedRealtimeNanos()
        val interpreter = Interpreter(job.model.toFile(), options)
        try {
            interpreter.allocateTensors()
            record.compileSeconds = seconds(start)
            val key = if (interpreter.signatureKeys.isEmpty()) null else (job.signature ?: interpreter.signatureKeys[0])
            val (_, outs) = ports(interpreter, job.signature)
            if (job.dumpTensors.isNotEmpty()) {
                record.unreadable["dump_tensors"] = "the Android harness does not dump intermediate tensors"
            }
            stage("run")
            fun invoke(inputs: List<Tensor>): List<Tensor> {
                val outBuffers = outs.map {
                    val t = if (key == null) interpreter.getOutputTensor(outs.indexOf(it))
                    else interpreter.getOutputTensorFromSignature(it.name, key)
                    ByteBuffer.allocateDirect(t.numBytes()).order(ByteOrder.nativeOrder())
                }
                if (key != null) {
                    val feed = inputs.associate { it.name to (direct(it.bytes()) as Any) }
                    val fetch = outs.indices.associate { outs[it].name to (outBuffers[it] as Any) }
                    interpreter.runSignature(feed, fetch, key)
                } else {
                    val byName = inputs.associateBy { it.name }
                    val feed = (0 until interpreter.inputTensorCount).map {
                        val name = interpreter.getInputTensor(it).name()
                        direct((byName[name] ?: error("no input named $name in the job")).bytes()) as Any
                    }.toTypedArray()
                    val fetch = outs.indices.associate { it to (outBuffers[it] as Any) }
                    interpreter.runForMultipleInputsOutputs(feed, fetch)
                }
                return outs.indices.map {
                    val buf = outBuffers[it]
                    buf.rewind()
                    val bytes = ByteArray(buf.remaining())
                    buf.get(bytes)
                    Tensor(outs[it].name, outs[it].dtype, outs[it].shape, bytes)
                }
            }
            timed(job, record, ::invoke)
            record.opsDelegated = if (gpu) null else 0
        } finally {
            interpreter.close()
            delegate?.close()
        }
    }

    private fun compiled(job: Job, record: ResultWriter.Backend, stage: (String) -> Unit, fp32: Boolean) {
        // The classic Interpreter only reads the signature's names, dtypes and shapes.
        val meta = Interpreter(job.model.toFile())
        val (ins, outs) = try { ports(meta, job.signature) } finally { meta.close() }
        val key = job.signature
        stage("compile")
        val options = CompiledModel.Options(Accelerator.GPU, Accelerator.CPU)
        options.gpuOptions = CompiledModel.GpuOptions(
            precision = if (fp32) CompiledModel.GpuOptions.Precision.FP32 else CompiledModel.GpuOptions.Precision.FP16,
        )
        val start = SystemClock.elapsedRealtimeNanos()
        val model = CompiledModel.create(job.model.toFile().path, options)
        try {
            record.compileSeconds = seconds(start)
            stage("run")
            fun invoke(inputs: List<Tensor>): List<Tensor> {
                val inBuffers = if (key != null) model.createInputBuffers(key) else model.createInputBuffers()
                val outBuffers = if (key != null) model.createOutputBuffers(key) else model.createOutputBuffers()
                try {
                    val byName = inputs.associateBy { it.name }
                    ins.forEachIndexed { i, port ->
                        write(inBuffers[i], byName[port.name] ?: error("no input named ${port.name} in the job"))
                    }
                    if (key != null) model.run(inBuffers, outBuffers, key) else model.run(inBuffers, outBuffers)
                    val values = mutableListOf<Tensor>()
                    outs.forEachIndexed { i, port ->
                        val value = read(outBuffers[i], port)
                        if (value == null) {
                            record.unreadable[port.name] = "TensorBuffer cannot read ${port.dtype.protocolName}"
                        } else {
                            values.add(value)
                        }
                    }
                    return values
                } finally {
                    inBuffers.forEach { it.close() }
                    outBuffers.forEach { it.close() }
                }
            }
            timed(job, record, ::invoke)
        } finally {
            model.close()
        }
    }

    /** TensorBuffer has typed writers for float32, int32, int8/uint8, bool and int64 only. */
    private fun write(buffer: TensorBuffer, t: Tensor) {
        when (t.dtype) {
            DType.FLOAT32 -> buffer.writeFloat(t.toFloatArray())
            DType.INT32 -> buffer.writeInt(t.toIntArray())
            DType.INT8, DType.UINT8 -> buffer.writeInt8(t.bytes())
            DType.BOOL -> buffer.writeBoolean(t.toBooleanArray())
            DType.INT64 -> buffer.writeLong(t.toLongArray())
            else -> throw IllegalArgumentException(
                "input ${t.name}: LiteRT's Kotlin TensorBuffer cannot write ${t.dtype.protocolName}",
            )
        }
    }

    private fun read(buffer: TensorBuffer, port: Port): Tensor? = when (port.dtype) {
        DType.FLOAT32 -> Tensor.ofFloats(port.name, port.shape, buffer.readFloat())
        DType.INT32 -> Tensor.ofInts(port.name, port.shape, buffer.readInt())
        DType.INT8, DType.UINT8 -> Tensor.ofBytes(port.name, port.dtype, port.shape, buffer.readInt8())
        DType.BOOL -> Tensor.ofBooleans(port.name, port.shape, buffer.readBoolean())
        DType.INT64 -> runCatching { Tensor.ofLongs(port.name, port.shape, buffer.readLong()) }.getOrNull()
        else -> null
    }

    /** Warm-up runs on the first set, then `timed_runs` per set; outputs of the last run. */
    private fun timed(job: Job, record: ResultWriter.Backend, invoke: (List<Tensor>) -> List<Tensor>) {
        val first = job.inputs(0)
        repeat(job.warmupRuns) {
            val t = SystemClock.elapsedRealtimeNanos()
            invoke(first)
            record.warmupSeconds.add(seconds(t))
        }
        for (s in job.inputSets.indices) {
            val inputs = job.inputs(s)
            val times = mutableListOf<Double>()
            var outputs: List<Tensor> = emptyList()
            repeat(job.timedRuns) {
                val t = SystemClock.elapsedRealtimeNanos()
                outputs = invoke(inputs)
                times.add(seconds(t))
            }
            record.runSeconds.add(times)
            record.addOutputs(outputs)
        }
        record.status = "ok"
    }
}
