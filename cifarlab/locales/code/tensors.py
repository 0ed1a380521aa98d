dataiter = iter(trainloader)
images, labels = next(dataiter)

images.shape     # torch.Size([4, 3, 32, 32])  rank 4: a batch
images[0].shape  # torch.Size([3, 32, 32])     rank 3: one image
images.dtype     # torch.float32
labels           # tensor([3, 8, 8, 0])        int64 class indices
images.device    # device(type='cpu')

device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
images = images.to(device)   # a copy on the device; .to() does not work in place

running_loss += loss.item()  # .item() copies one number back and waits for the GPU
