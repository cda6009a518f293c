"""The seed recipes' launch commands as the field reports give them (facts, not code).

Shared by the unit tests of the argv builder and by the twin's verifiers.
Placeholders: {rank} (node rank), {gid} (the node's RoCE v2 GID index), {srt}
(SGLang's srt package inside the image).
"""

SRT = "/sgl-workspace/sglang/python/sglang/srt"

# Field report 002, section 6: the launch of one rank of the Qwen3.8-27B TP=4 cluster.
QWEN38_TP4_LAUNCH = """
docker run --rm --name qwen38-tp4-r{rank} --gpus all
  --memory 100g --memory-swap 100g --shm-size 16g
  --network host --ipc=host --cap-add IPC_LOCK --device /dev/infiniband
  -e HF_ENDPOINT=https://hf-mirror.com -e HF_HUB_DISABLE_XET=1
  -e PYTHONDONTWRITEBYTECODE=1
  -e NCCL_IB_HCA=rocep1s0f0 -e NCCL_SOCKET_IFNAME=enP7s7
  -e NCCL_IB_ROCE_VERSION_NUM=2 -e NCCL_IB_ADDR_RANGE=10.0.30.0/24
  -e NCCL_IB_GID_INDEX={gid} -e NCCL_DEBUG=INFO
  -e MASTER_ADDR=10.0.30.1 -e MASTER_PORT=23000
  -v /home/tiger/.config/qwen38/sglang-cache:/cache
  -v /home/tiger/.cache/huggingface:/root/.cache/huggingface
  -v /home/tiger/.config/qwen38:/out
  -v /home/tiger/models:/home/tiger/models
  -v /home/tiger/sglang-patch/tokenizer_manager.py:{srt}/managers/tokenizer_manager.py
  -v /home/tiger/sglang-patch/watchdog.py:{srt}/utils/watchdog.py
  qwen38-dflash2:v1.2.2
  python3 -m sglang.launch_server
    --trust-remote-code --model-path /home/tiger/models/RadixArk/Qwen3.8-27B-NVFP4-BF16-LMHead
    --tp-size 4 --nnodes 4 --node-rank {rank}
    --dist-init-addr 10.0.30.1:23000
    --served-model-name qwen3.8-27b
    --mem-fraction-static 0.50
    --attention-backend flashinfer --chunked-prefill-size 8192 --kv-cache-dtype fp8_e4m3
    --disable-prefill-cuda-graph --cuda-graph-max-bs 8
    --disable-flashinfer-autotune
    --speculative-algorithm DFLASH --speculative-draft-model-path z-lab/Qwen3.8-27B-DFlash2
    --speculative-draft-model-revision 50307d4c4cde6860d4eee73e2547cd786fe8e8a4
    --speculative-num-draft-tokens 8 --speculative-draft-model-quantization unquant
    --mamba-radix-cache-strategy extra_buffer --mamba-ssm-dtype bfloat16
    --max-mamba-cache-size 96 --max-running-requests 8
    --enable-torch-compile --torch-compile-max-bs 4
    --num-continuous-decode-steps 2 --watchdog-timeout 120
    --reasoning-parser qwen3 --tool-call-parser qwen3_coder
    --chat-template /out/chat-template-sglang.jinja
    --host 0.0.0.0 --port 8081
"""
